package workflows

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Steps whose conditions are each costly, ready at once: the run renders
// them across several workflow tasks (a short timer between), never all in
// one task that would outlive its timeout and be retried for ever.
func TestCostlyRendersAreSpreadAcrossWorkflowTasks(t *testing.T) {
	var rb strings.Builder
	rb.WriteString("apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: costly}\nsteps:\n")
	for i := range 8 {
		fmt.Fprintf(&rb, "  - {id: s%d, when: \"lists.range(900000).size() == 0\", action: host.run, on: worker-1, with: {command: \"true\"}}\n", i)
	}
	env, f := newEnv(t)
	timers := 0
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		if d <= time.Second {
			timers++
		}
	})
	env.ExecuteWorkflow(Runbook, input(t, rb.String(), nil))
	res, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Progress.Steps {
		if s.State != StateSkipped {
			t.Errorf("step %s: %s, want skipped", s.ID, s.State)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("host actions ran: %v", f.calls)
	}
	// 8 renders of 0.9M units, TaskCostLimit 1M: two renders a task, at least 3 breaks.
	if timers < 3 {
		t.Errorf("%d breaks between the renders, want at least 3", timers)
	}
}
