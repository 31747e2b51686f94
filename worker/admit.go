package worker

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// admitter answers workflows.AdmitRunActivity from Temporal's own records:
// a top-level run is admitted only when no other run was ever started
// under its workflow ID (within the namespace's retention; older inputs
// are refused by their sealed issue time). Kedge's front doors never
// reuse an ID, so another run there means this one replays a sealed input
// copied from it.
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
	res.Admitted = true
	return res, nil
}
