package workflows

import "go.temporal.io/sdk/workflow"

func workflowOptions() workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: RunbookWorkflow}
}

// Register registers Kedge's workflows on a worker.
func Register(r interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(Runbook, workflowOptions())
	r.RegisterWorkflowWithOptions(Rollout, workflow.RegisterOptions{Name: RolloutWorkflow})
	r.RegisterWorkflowWithOptions(Compensate, workflow.RegisterOptions{Name: CompensateWorkflow})
}
