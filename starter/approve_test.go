package starter

import (
	"strings"
	"testing"

	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

// A decision goes to the pause it is for, at any depth: the only approval
// waiting (here in a child runbook), the named one, or the paused
// rollout; several candidates are named back instead of guessed.
func TestChoosePause(t *testing.T) {
	gate := runs.Pause{Kind: runs.PauseApproval, Target: "top/child-1", Step: "gate"}
	other := runs.Pause{Kind: runs.PauseApproval, Target: "top/child-2", Step: "confirm"}
	rollout := runs.Pause{Kind: runs.PauseRollout, Target: "top/workers", Step: "workers", Seq: 1}
	for _, c := range []struct {
		name     string
		pauses   []runs.Pause
		decision string
		step     string
		want     runs.Pause
		err      string
	}{
		{"the only approval, in a child", []runs.Pause{gate, rollout}, workflows.DecisionApprove, "", gate, ""},
		{"the named one", []runs.Pause{gate, other}, workflows.DecisionReject, "confirm", other, ""},
		{"two waiting", []runs.Pause{gate, other}, workflows.DecisionApprove, "", runs.Pause{}, "2 steps waiting for approval (gate (in top/child-1), confirm (in top/child-2))"},
		{"the paused rollout", []runs.Pause{gate, rollout}, workflows.DecisionAbort, "", rollout, ""},
		{"nothing waiting: sent to the run as it is", nil, workflows.DecisionContinue, "", runs.Pause{Kind: runs.PauseRollout, Target: "top"}, ""},
		{"no such step: sent to the run, which refuses", []runs.Pause{gate}, workflows.DecisionApprove, "nope", runs.Pause{Kind: runs.PauseApproval, Target: "top", Step: "nope"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := choosePause("top", c.pauses, c.decision, c.step)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !got.Same(c.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}
