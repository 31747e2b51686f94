package runs

import (
	"testing"

	workflowpb "go.temporal.io/api/workflow/v1"

	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/workflows"
)

// A step whose action Temporal is retrying shows the attempt it is on,
// for its host; pending activities of other steps, of a first attempt,
// or not named by Kedge change nothing.
func TestWithPendingShowsTheAttemptUnderWay(t *testing.T) {
	p := workflows.Progress{Steps: []workflows.StepProgress{
		{ID: "swap", State: workflows.StateRunning, Hosts: []workflows.HostProgress{{Name: "w1"}, {Name: "w2"}}},
		{ID: "check", State: workflows.StateRunning},
		{ID: "done", State: workflows.StateSucceeded, Attempts: 1},
	}}
	withPending(&p, []*workflowpb.PendingActivityInfo{
		{ActivityId: attempt.ID("swap", "w2", 7, 3), Attempt: 3},
		{ActivityId: attempt.ID("check", "", 8, 3), Attempt: 2},
		{ActivityId: attempt.ID("swap", "w1", 9, 3), Attempt: 1},
		{ActivityId: attempt.ID("done", "", 3, 3), Attempt: 4},
		{ActivityId: "12", Attempt: 5},
	})
	swap, check, done := p.Steps[0], p.Steps[1], p.Steps[2]
	if swap.Attempts != 3 || swap.Hosts[0].Attempts != 0 || swap.Hosts[1].Attempts != 3 {
		t.Errorf("swap: %+v", swap)
	}
	if check.Attempts != 2 {
		t.Errorf("check: %+v", check)
	}
	if done.Attempts != 1 {
		t.Errorf("a step that ended took a pending attempt: %+v", done)
	}
}
