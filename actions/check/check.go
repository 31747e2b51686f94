package check

import (
	"time"

	"kedge.dev/kedge/actions/spec"
)

// Action is the action name.
const Action = "kedge.check"

// Input is a condition and what to say when it is false.
type Input struct {
	That    bool   `json:"that" kedge:"required" doc:"the condition, usually an expression"`
	Message string `json:"message" kedge:"required" doc:"why the runbook stops when the condition is false"`
}

// Result is empty: a check passes or fails.
type Result struct {
	Passed bool `json:"passed"`
}

func init() {
	spec.Register(spec.Row{Name: Action, Doc: "stop the runbook when a condition is false (a guard)",
		In: Input{}, Out: Result{}, Timeout: time.Minute,
		Summary: `check a condition`})
}
