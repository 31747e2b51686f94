// Package guard holds kedge.check, the action that stops a runbook when a
// condition does not hold (a guard such as "never remove the last
// controller"). It touches nothing. Its name and its input and result
// types are declared in kedge.dev/kedge/actions/check (pure data).
package guard

import (
	"context"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/check"
	"kedge.dev/kedge/actions/errtype"
)

// Check fails, without retry, when the condition is false.
func Check(_ context.Context, in check.Input) (check.Result, error) {
	if !in.That {
		return check.Result{}, temporal.NewNonRetryableApplicationError(in.Message, errtype.CheckFailed, nil)
	}
	return check.Result{Passed: true}, nil
}
