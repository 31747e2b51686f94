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
	typ := errtype.ConnectionLost // anything else went wrong on the way to the host
	switch {
	case errors.Is(err, sshpool.ErrHostKeyMismatch):
		typ = errtype.HostKeyMismatch
	case errors.Is(err, sshpool.ErrHostUnknown):
		typ = errtype.HostUnknown
	case errors.Is(err, sshpool.ErrAuthFailed):
		typ = errtype.AuthFailed
	case errors.Is(err, sshpool.ErrPrivilege):
		typ = errtype.PrivilegeEscalationFailed
	case errors.Is(err, sshpool.ErrConfig):
		typ = errtype.InvalidInput
	case errors.Is(err, sshpool.ErrUnreachable):
		typ = errtype.HostUnreachable
	case errors.Is(err, sshpool.ErrConnectionLost):
		typ = errtype.ConnectionLost
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), typ, temporal.ApplicationErrorOptions{
		NonRetryable: !sshpool.Retryable(err),
	})
}
