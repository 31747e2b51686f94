package host

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/activities/sshpool"
)

// Error types, as runbooks and operators see them.
const (
	ErrTypeHostKeyMismatch = errtype.HostKeyMismatch
	ErrTypeHostUnknown     = errtype.HostUnknown
	ErrTypeAuthFailed      = errtype.AuthFailed
	ErrTypeUnreachable     = errtype.HostUnreachable
	ErrTypeConnectionLost  = errtype.ConnectionLost
	ErrTypeCommandFailed   = errtype.CommandFailed
	ErrTypeCommandTimeout  = errtype.CommandTimeout
	ErrTypeFileNotFound    = errtype.FileNotFound
	ErrTypeUnitFailed      = errtype.UnitFailed
	ErrTypeInvalidInput    = errtype.InvalidInput
	// ErrTypePrivilege is a login user that cannot become root (sudo
	// missing or wanting a password). Not retried.
	ErrTypePrivilege = errtype.PrivilegeEscalationFailed
	// ErrTypeFileFailed is an SFTP operation the host refused (permission
	// denied, no space left, not a directory...). Retryable: the step's
	// retry policy decides.
	ErrTypeFileFailed = errtype.FileOperationFailed
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
	return &typedError{typ: ErrTypeInvalidInput, msg: msg, nonRetryable: true}
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
	typ := ErrTypeConnectionLost // anything else went wrong on the way to the host
	switch {
	case errors.Is(err, sshpool.ErrHostKeyMismatch):
		typ = ErrTypeHostKeyMismatch
	case errors.Is(err, sshpool.ErrHostUnknown):
		typ = ErrTypeHostUnknown
	case errors.Is(err, sshpool.ErrAuthFailed):
		typ = ErrTypeAuthFailed
	case errors.Is(err, sshpool.ErrPrivilege):
		typ = ErrTypePrivilege
	case errors.Is(err, sshpool.ErrConfig):
		typ = ErrTypeInvalidInput
	case errors.Is(err, sshpool.ErrUnreachable):
		typ = ErrTypeUnreachable
	case errors.Is(err, sshpool.ErrConnectionLost):
		typ = ErrTypeConnectionLost
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), typ, temporal.ApplicationErrorOptions{
		NonRetryable: !sshpool.Retryable(err),
	})
}
