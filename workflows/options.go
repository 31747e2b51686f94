package workflows

import "go.temporal.io/sdk/workflow"

func workflowOptions() workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: RunbookWorkflow}
}

// Register registers Kedge's workflows on a worker: the runbook under
// RunbookWorkflow and, as the dynamic workflow, under every other type, so
// a runbook can run as its own name (TypeOf); the rollout; the
// compensation; the chat follower; inspect.
func Register(r interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterDynamicWorkflow(w any, options workflow.DynamicRegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(Runbook, workflowOptions())
	r.RegisterDynamicWorkflow(runbookByName, workflow.DynamicRegisterOptions{})
	r.RegisterWorkflowWithOptions(Rollout, workflow.RegisterOptions{Name: RolloutWorkflow})
	r.RegisterWorkflowWithOptions(Compensate, workflow.RegisterOptions{Name: CompensateWorkflow})
	r.RegisterWorkflowWithOptions(ChatFollow, workflow.RegisterOptions{Name: ChatFollowWorkflow})
	r.RegisterWorkflowWithOptions(Inspect, workflow.RegisterOptions{Name: InspectWorkflow})
}
