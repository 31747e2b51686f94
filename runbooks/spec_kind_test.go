package runbooks

import "testing"

// A rollout step is a rollout from the start: its progress, the plan and
// every front end's view say so before it runs, not "runbook".
func TestStepKind(t *testing.T) {
	for want, s := range map[string]Step{
		"action":   {Action: "host.run"},
		"runbook":  {Runbook: "child"},
		"rollout":  {Runbook: "child", Rollout: &Rollout{Over: "${ params.nodes }"}},
		"approval": {Approval: &Approval{Prompt: "go?"}},
	} {
		if got := s.Kind(); got != want {
			t.Errorf("%+v: %s, want %s", s, got, want)
		}
	}
}
