package runs

import (
	"context"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// Open lists the running top-level runs of runbook on cluster: every run
// under workflows.RunPrefix, wherever it was started (CLI, chat,
// schedule), whatever the workflow type a runbook runs as. One run of a
// runbook per cluster at a time is Kedge's rule: the CLI and chat both
// refuse a start while this is not empty. Visibility can lag a start by a
// moment, so two starts at the same moment can both pass.
func Open(ctx context.Context, cl client.Client, namespace, runbook, cluster string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	prefix := workflows.RunPrefix(runbook, cluster)
	q := fmt.Sprintf("ExecutionStatus = 'Running' AND WorkflowId STARTS_WITH '%s'", strings.ReplaceAll(prefix, "'", ""))
	resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: q, PageSize: 100})
	if err != nil {
		return nil, fmt.Errorf("list runs of %s on %s: %w", runbook, cluster, err)
	}
	var out []*workflowpb.WorkflowExecutionInfo
	for _, e := range resp.GetExecutions() {
		if e.GetParentExecution() == nil && IsRunbookType(e.GetType().GetName()) && stillRunning(ctx, cl, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// stillRunning asks the run itself: the visibility store a list reads
// catches up with a run's end a moment later (seconds on a busy
// server), and a run terminated or ended just now is no longer busy.
// When the run cannot be asked, the list's word stands.
func stillRunning(ctx context.Context, cl client.Client, e *workflowpb.WorkflowExecutionInfo) bool {
	d, err := cl.DescribeWorkflowExecution(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId())
	if err != nil {
		return true
	}
	return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// IsRunbookType says whether a top-level workflow of this type runs a
// runbook: runbooks run as "runbook" or under their own names.
func IsRunbookType(name string) bool {
	switch name {
	case workflows.RolloutWorkflow, workflows.CompensateWorkflow, workflows.ChatFollowWorkflow, "":
		return false
	}
	return true
}
