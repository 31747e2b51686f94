package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// Holders applies Kedge's one rule of exclusivity: one run of a runbook
// per cluster at a time. It returns the open top-level runs of runbook on
// cluster that hold it, the earliest first; none means a run may go.
//
// The admission of every top-level run asks it with self, the run being
// admitted: only runs started before self hold the runbook (the earlier
// start, then the smaller run ID), so of two runs started together
// exactly one goes on, whichever asks first. A front door asks it with no
// self before a start, to answer at once (an exit code, a 409) rather
// than after the run's admission refuses it.
//
// Runs are found three ways: visibility's list of runs under
// workflows.RunPrefix (it lags a start by a moment), the ID chat's runs
// had before IDs named requests, and known: IDs the caller started
// lately, which visibility may not list yet. Each is asked for itself
// before it counts: visibility also lags a run's end.
func Holders(ctx context.Context, cl client.Client, namespace, runbook, cluster string, self *workflows.Execution, known ...string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	open, err := listOpen(ctx, cl, namespace, runbook, cluster)
	if err != nil {
		return nil, err
	}
	listed := func(id string) bool {
		return slices.ContainsFunc(open, func(e *workflowpb.WorkflowExecutionInfo) bool { return e.GetExecution().GetWorkflowId() == id })
	}
	legacy := strings.TrimSuffix(workflows.RunPrefix(runbook, cluster), "/")
	for _, id := range append([]string{legacy}, known...) {
		if id == "" || listed(id) {
			continue
		}
		d, err := cl.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			continue
		case err != nil:
			return nil, fmt.Errorf("describe %s: %w", id, err)
		}
		if e := d.GetWorkflowExecutionInfo(); e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && e.GetParentExecution() == nil && IsRunbookType(e.GetType().GetName()) {
			open = append(open, e)
		}
	}
	slices.SortFunc(open, func(a, b *workflowpb.WorkflowExecutionInfo) int {
		switch {
		case before(a.GetStartTime().AsTime(), a.GetExecution().GetRunId(), b.GetStartTime().AsTime(), b.GetExecution().GetRunId()):
			return -1
		case before(b.GetStartTime().AsTime(), b.GetExecution().GetRunId(), a.GetStartTime().AsTime(), a.GetExecution().GetRunId()):
			return 1
		}
		return 0
	})
	if self == nil {
		return open, nil
	}
	var start time.Time
	for _, e := range open {
		if e.GetExecution().GetRunId() == self.RunID {
			start = e.GetStartTime().AsTime()
		}
	}
	if start.IsZero() { // not listed yet: ask for this run itself
		d, err := cl.DescribeWorkflowExecution(ctx, self.WorkflowID, self.RunID)
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", self.WorkflowID, err)
		}
		start = d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
	}
	var earlier []*workflowpb.WorkflowExecutionInfo
	for _, e := range open {
		if e.GetExecution().GetRunId() != self.RunID && before(e.GetStartTime().AsTime(), e.GetExecution().GetRunId(), start, self.RunID) {
			earlier = append(earlier, e)
		}
	}
	return earlier, nil
}

// before orders two runs by start time (to the millisecond, the
// precision every visibility store keeps), then by run ID: of two runs,
// exactly one is before the other.
func before(start time.Time, runID string, than time.Time, thanRunID string) bool {
	a, b := start.Truncate(time.Millisecond), than.Truncate(time.Millisecond)
	return a.Before(b) || a.Equal(b) && runID < thanRunID
}

// listOpen lists the running top-level runs of runbook on cluster: every
// run under workflows.RunPrefix, wherever it was started (CLI, chat,
// schedule), whatever the workflow type a runbook runs as (Holders reads
// it; visibility can lag a start by a moment).
func listOpen(ctx context.Context, cl client.Client, namespace, runbook, cluster string) ([]*workflowpb.WorkflowExecutionInfo, error) {
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
	case workflows.RolloutWorkflow, workflows.CompensateWorkflow, workflows.ChatFollowWorkflow, workflows.FleetLockWorkflow, "":
		return false
	}
	return true
}
