package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

// admitter answers workflows.AdmitRunActivity from Temporal's own records:
// a top-level run is admitted only when no other run was ever started
// under its workflow ID (within the namespace's retention; older inputs
// are refused by their sealed issue time), when no earlier run of its
// runbook is open on its cluster, and a schedule's run only when the
// schedule its action was sealed for exists, was not changed since, and
// lists this run among those it started. Kedge's front doors never reuse
// an ID, so another run there means this one replays a sealed input
// copied from it.
type admitter struct {
	client client.Client
	// scheduleWait bounds how long a schedule's run waits for its
	// schedule to list it (the schedule records a start after Temporal
	// has made the run); scheduleEvery is how often it asks.
	scheduleWait, scheduleEvery time.Duration
}

// How long a scheduled run waits for its schedule to list it, by default:
// the schedule records a start milliseconds after Temporal made the run
// (seen here: listed at the first ask), ten seconds is for a loaded server.
const (
	defaultScheduleWait  = 10 * time.Second
	defaultScheduleEvery = 500 * time.Millisecond
)

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
	if in.Scheduled && in.ScheduleID != "" {
		reason, err := a.startedBySchedule(ctx, in)
		if err != nil || reason != "" {
			res.Reason = reason
			return res, err
		}
	} else if in.Scheduled && in.Runbook != "" {
		res.Reason = "its schedule action was sealed before Kedge bound actions to their schedule: run `kedge schedule` again to seal it anew"
		return res, nil
	}
	if in.Runbook != "" && in.Cluster != "" {
		reason, err := a.earlierRun(ctx, info.Namespace, in)
		if err != nil || reason != "" {
			res.Reason = reason
			return res, err
		}
	}
	res.Admitted = true
	return res, nil
}

// startedBySchedule asks the schedule a scheduled run's action was sealed
// for whether it started this run: it must exist, must not have been
// changed since the action was sealed (an update that kept an old action,
// or a schedule made again under the ID with a copied one, is refused),
// and must list this run among its recent or running ones. A schedule
// records a start a moment after Temporal made the run: it is asked
// again until scheduleWait has passed.
func (a *admitter) startedBySchedule(ctx context.Context, in workflows.AdmitRunInput) (string, error) {
	wait, every := a.scheduleWait, a.scheduleEvery
	if wait == 0 {
		wait, every = defaultScheduleWait, defaultScheduleEvery
	}
	h := a.client.ScheduleClient().GetHandle(ctx, in.ScheduleID)
	deadline := time.Now().Add(wait)
	for {
		d, err := h.Describe(ctx)
		var missing *serviceerror.NotFound
		if errors.As(err, &missing) {
			return fmt.Sprintf("schedule %s no longer exists: the action of a deleted schedule starts nothing", in.ScheduleID), nil
		}
		if err != nil {
			return "", fmt.Errorf("describe schedule %s: %w", in.ScheduleID, err)
		}
		// A schedule never updated has no update time: the SDK gives the
		// zero time, or the Unix epoch of an unset timestamp.
		changed := d.Info.LastUpdateAt
		if changed.Unix() <= 0 {
			changed = d.Info.CreatedAt
		}
		if off := changed.Sub(in.IssuedAt); off > workflows.ScheduleSealWindow || off < -workflows.ScheduleSealWindow {
			return fmt.Sprintf("schedule %s was made or changed at %s, and its action was sealed at %s: an action from before, or a schedule changed without the key; run `kedge schedule` again to seal it anew",
				in.ScheduleID, changed.UTC().Format(time.RFC3339), in.IssuedAt.UTC().Format(time.RFC3339)), nil
		}
		if scheduleStarted(d.Info, in.WorkflowID, in.RunID) {
			return "", nil
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("schedule %s did not start this run: a copy of its action started by hand", in.ScheduleID), nil
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(every):
		}
	}
}

// scheduleStarted reports whether a schedule lists the run among those it
// started (the recent ones, or those still running).
func scheduleStarted(info client.ScheduleInfo, workflowID, runID string) bool {
	is := func(e *client.ScheduleWorkflowExecution) bool {
		return e != nil && e.WorkflowID == workflowID && e.FirstExecutionRunID == runID
	}
	for _, r := range info.RecentActions {
		if is(r.StartWorkflowResult) {
			return true
		}
	}
	for i := range info.RunningWorkflows {
		if is(&info.RunningWorkflows[i]) {
			return true
		}
	}
	return false
}

// earlierRun refuses a top-level run while an earlier run of its runbook
// is open on its cluster (runs.Holders, Kedge's one rule of
// exclusivity): checked here, where no door can be passed by: a
// schedule's start, two starts that passed their doors within
// visibility's lag, a start made by hand with a copied input.
func (a *admitter) earlierRun(ctx context.Context, namespace string, in workflows.AdmitRunInput) (string, error) {
	earlier, err := runs.Holders(ctx, a.client, namespace, in.Runbook, in.Cluster, &workflows.Execution{WorkflowID: in.WorkflowID, RunID: in.RunID})
	if err != nil || len(earlier) == 0 {
		return "", err
	}
	id := earlier[0].GetExecution().GetWorkflowId()
	if in.Scheduled {
		return fmt.Sprintf("%s already runs on %s: %s; this scheduled run is skipped", in.Runbook, in.Cluster, id), nil
	}
	return fmt.Sprintf("%s already runs on %s: %s; one run of a runbook per cluster at a time", in.Runbook, in.Cluster, id), nil
}
