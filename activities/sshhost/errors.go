package sshhost

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/activities/sshpool"
)

// typedError carries a type for errors that arise in this package.
type typedError struct {
	typ          string
	msg          string
	nonRetryable bool
	details      []any
}

func (e *typedError) Error() string { return e.msg }

// timeoutSaid is err with msg for its message when err is a command that
// did not finish in time: the action's own words for what did not finish
// and in how long. Any other error is err as it was.
func timeoutSaid(err error, msg string) error {
	if te, ok := err.(*typedError); ok && te.is(errtype.CommandTimeout) {
		te.msg = msg
	}
	return err
}

func (e *typedError) is(typ string) bool { return e.typ == typ }

func invalid(msg string) error {
	return &typedError{typ: errtype.InvalidInput, msg: msg, nonRetryable: true}
}

// toTemporal translates an error into a Temporal application error, once,
// at the activity boundary.
func toTemporal(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return temporal.NewCanceledError(err.Error())
	}
	var te *typedError
	if errors.As(err, &te) {
		return temporal.NewApplicationErrorWithOptions(te.msg, te.typ, temporal.ApplicationErrorOptions{
			NonRetryable: te.nonRetryable, Details: te.details,
		})
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), poolType(err), temporal.ApplicationErrorOptions{
		NonRetryable: !sshpool.Retryable(err),
	})
}

// poolType is the error type of a failure on the way to the host, read
// from the error sshpool classified it as.
func poolType(err error) string {
	switch {
	case errors.Is(err, sshpool.ErrHostKeyMismatch):
		return errtype.HostKeyMismatch
	case errors.Is(err, sshpool.ErrHostUnknown):
		return errtype.HostUnknown
	case errors.Is(err, sshpool.ErrAuthFailed):
		return errtype.AuthFailed
	case errors.Is(err, sshpool.ErrPrivilege):
		return errtype.PrivilegeEscalationFailed
	case errors.Is(err, sshpool.ErrConfig):
		return errtype.InvalidInput
	case errors.Is(err, sshpool.ErrUnreachable):
		return errtype.HostUnreachable
	case errors.Is(err, sshpool.ErrConnectionLost):
		return errtype.ConnectionLost
	}
	return errtype.ConnectionLost // anything else went wrong on the way to the host
}
