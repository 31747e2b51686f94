package runs

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// StartOptions say where a front door starts a run and for whom.
type StartOptions struct {
	// ID is the run's workflow ID (workflows.RunWorkflowID).
	ID        string
	TaskQueue string
	// Memo is kept with the run (chat records the request there).
	Memo map[string]any
	// By names who asked, in the Web UI's summary ("", the CLI's
	// operator, says nothing).
	By string
}

// Start starts a top-level runbook run the way every front door does:
// its input stamped with the time it was admitted (the workflow refuses
// an input sealed far from its start), typed and labelled for the Web UI
// (workflows.Describe), and refused when its workflow ID holds or held a
// run. The one-run-per-cluster rule (Holders) is the run's admission's;
// a door asks it first to answer at once (chat answers a repeated
// request with its run instead).
func Start(ctx context.Context, cl client.Client, o StartOptions, in workflows.RunbookInput, now time.Time) (client.WorkflowRun, error) {
	in = workflows.Admit(in, now)
	md := workflows.Describe(in)
	summary := md.StaticSummary
	if o.By != "" {
		summary += ", from " + o.By
	}
	return cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       o.ID,
		TaskQueue:                                o.TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     o.Memo,
		TypedSearchAttributes:                    md.SearchAttributes,
		StaticSummary:                            summary,
		StaticDetails:                            md.StaticDetails,
	}, md.WorkflowType, in)
}
