package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// DeadlockDetectionTimeout is how long a workflow task may run before the
// worker fails it as deadlocked (the SDK's default is one second): a task
// renders up to expr.TaskCostLimit and one render more, under half a
// second on an idle 2-core machine and several times that on a busy one.
// It stays well inside the workflow task timeout (10 s).
const DeadlockDetectionTimeout = 5 * time.Second

func workflowOptions() workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: RunbookWorkflow}
}

// Register registers Kedge's workflows on a worker: the runbook under
// RunbookWorkflow and, as the dynamic workflow, under every other type, so
// a runbook can run as its own name (TypeOf); the rollout; the
// compensation; the chat follower; inspect; the FleetLock coordinator.
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
	r.RegisterWorkflowWithOptions(FleetLock, workflow.RegisterOptions{Name: FleetLockWorkflow})
}
