// Package check holds kedge.check, the action that stops a runbook when a
// condition does not hold (a guard such as "never remove the last
// controller"). It touches nothing. Its name and its input and result
// types are declared in kedge.dev/kedge/actions/check (pure data); the
// ones here are aliases.
package check

import (
	"context"

	"go.temporal.io/sdk/temporal"

	api "kedge.dev/kedge/actions/check"
	"kedge.dev/kedge/actions/errtype"
)

// Action is the action name, declared in actions/check.
const Action = api.Action

// Check's input and result, declared in actions/check.
type (
	Input  = api.Input
	Result = api.Result
)

// Check fails, without retry, when the condition is false.
func Check(_ context.Context, in Input) (Result, error) {
	if !in.That {
		return Result{}, temporal.NewNonRetryableApplicationError(in.Message, errtype.CheckFailed, nil)
	}
	return Result{Passed: true}, nil
}
