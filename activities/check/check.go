// Package check holds kedge.check, the action that stops a runbook when a
// condition does not hold (a guard such as "never remove the last
// controller"). It touches nothing.
package check

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
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

// Check fails, without retry, when the condition is false.
func Check(_ context.Context, in Input) (Result, error) {
	if !in.That {
		return Result{}, temporal.NewNonRetryableApplicationError(in.Message, "CheckFailed", nil)
	}
	return Result{Passed: true}, nil
}

// Register registers kedge.check.
func Register(r interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}) {
	r.RegisterActivityWithOptions(Check, activity.RegisterOptions{Name: Action})
}
