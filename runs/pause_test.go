package runs

import (
	"testing"

	"kedge.dev/kedge/workflows"
)

// Pauses of a rollout's alert gate are told apart from each other and
// from its failure budget's, so a button of one never decides another.
func TestRolloutPausesOfTheAlertGateAreTheirOwn(t *testing.T) {
	st := workflows.StepProgress{ID: "workers", Kind: "rollout", Child: "run/workers"}
	budget := rolloutPause(st, workflows.Progress{Error: "paused: 1 failed, budget 0",
		Steps: []workflows.StepProgress{{ID: "w-1", State: workflows.StateFailed, LastError: "drain"}}})
	first := rolloutPause(st, workflows.Progress{Error: "paused: alerts firing: NodeDown", AlertPause: 1})
	second := rolloutPause(st, workflows.Progress{Error: "paused: alerts firing: NodeDown", AlertPause: 2})
	if budget.Alerts || budget.Seq != 1 || !first.Alerts || first.Seq != -1 || second.Seq != -2 {
		t.Errorf("budget %+v, first %+v, second %+v", budget, first, second)
	}
	if first.Same(second) || first.Same(budget) || !first.Same(first) {
		t.Error("two pauses of the alert gate are the same decision point")
	}
}
