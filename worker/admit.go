package worker

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/internal/runs"
	"kedge.dev/kedge/workflows"
)

// admitter answers workflows.AdmitRunActivity from Temporal's own records:
// a top-level run is admitted only when no other run was ever started
// under its workflow ID (within the namespace's retention; older inputs
// are refused by their sealed issue time), and a schedule's run only when
// no earlier run of its runbook is open on its cluster. Kedge's front
// doors never reuse an ID,
// so another run there means this one replays a sealed input copied from
// it.
type admitter struct {
	client client.Client
}

// AdmitRun looks for other runs of the asking workflow's ID.
func (a *admitter) AdmitRun(ctx context.Context, in workflows.AdmitRunInput) (workflows.AdmitRunResult, error) {
	info := activity.GetInfo(ctx)
	res := workflows.AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID}
	if info.WorkflowExecution.ID != in.WorkflowID || info.WorkflowExecution.RunID != in.RunID {
		res.Reason = fmt.Sprintf("admission asked for %s by another run (%s)", in.WorkflowID, info.WorkflowExecution.ID)
		return res, nil
	}
	if strings.ContainsAny(in.WorkflowID, `'"\`) {
		res.Reason = "its workflow ID holds a quote or a backslash, which Kedge never gives"
		return res, nil
	}
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: info.Namespace,
		Query:     fmt.Sprintf("WorkflowId = '%s'", in.WorkflowID),
		PageSize:  20,
	}
	for {
		page, err := a.client.ListWorkflow(ctx, req)
		if err != nil {
			return res, fmt.Errorf("list the runs of %s: %w", in.WorkflowID, err)
		}
		for _, e := range page.GetExecutions() {
			if other := e.GetExecution().GetRunId(); other != in.RunID {
				res.Reason = fmt.Sprintf("another run of %s exists (run %s, started %s, %s): its sealed input is not started again",
					in.WorkflowID, other, e.GetStartTime().AsTime().UTC().Format("2006-01-02T15:04:05Z"),
					strings.ToLower(strings.TrimPrefix(e.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")))
				return res, nil
			}
		}
		if len(page.GetNextPageToken()) == 0 {
			break
		}
		req.NextPageToken = page.GetNextPageToken()
	}
	if in.Scheduled && in.Runbook != "" && in.Cluster != "" {
		reason, err := a.earlierRun(ctx, info.Namespace, in)
		if err != nil || reason != "" {
			res.Reason = reason
			return res, err
		}
	}
	res.Admitted = true
	return res, nil
}

// earlierRun refuses a schedule's run while an earlier run of its runbook
// is open on its cluster: the one-run-per-cluster rule the front doors
// check before a start (runs.Open), for the one start no front door sees.
// Of two open runs the earlier start (then the smaller run ID) goes on
// and the later is refused, whichever asks first: two schedules firing
// together are never both skipped.
//
// Runs from the front doors are not checked here: their door checked, and
// refusing the later of two runs that passed it within visibility's lag
// is a change of its own (TestACopiedApprovalApprovesNothing starts two
// such runs on purpose).
func (a *admitter) earlierRun(ctx context.Context, namespace string, in workflows.AdmitRunInput) (string, error) {
	open, err := runs.Open(ctx, a.client, namespace, in.Runbook, in.Cluster)
	if err != nil {
		return "", err
	}
	var self time.Time
	for _, e := range open {
		if e.GetExecution().GetRunId() == in.RunID {
			self = e.GetStartTime().AsTime()
		}
	}
	if self.IsZero() { // not listed yet: ask for this run itself
		d, err := a.client.DescribeWorkflowExecution(ctx, in.WorkflowID, in.RunID)
		if err != nil {
			return "", fmt.Errorf("describe %s: %w", in.WorkflowID, err)
		}
		self = d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
	}
	for _, e := range open {
		if e.GetExecution().GetRunId() == in.RunID || !before(e.GetStartTime().AsTime(), e.GetExecution().GetRunId(), self, in.RunID) {
			continue
		}
		id := e.GetExecution().GetWorkflowId()
		// Visibility lists a run that just ended for a moment longer: ask
		// the run itself before refusing this one for it.
		d, err := a.client.DescribeWorkflowExecution(ctx, id, e.GetExecution().GetRunId())
		if err != nil {
			return "", fmt.Errorf("describe %s: %w", id, err)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		return fmt.Sprintf("%s already runs on %s: %s; this scheduled run is skipped", in.Runbook, in.Cluster, id), nil
	}
	return "", nil
}

// before orders two runs by start time (to the millisecond, the
// precision every visibility store keeps), then by run ID: of two runs,
// exactly one is before the other.
func before(start time.Time, runID string, than time.Time, thanRunID string) bool {
	a, b := start.Truncate(time.Millisecond), than.Truncate(time.Millisecond)
	return a.Before(b) || a.Equal(b) && runID < thanRunID
}
