package sshpool

import (
	"errors"
	"fmt"
)

// Classified errors. Wrapped errors keep the detail; errors.Is tells the
// class. Mismatch, unknown host and auth failures cannot be fixed by
// retrying; unreachable hosts and lost connections can.
var (
	ErrHostKeyMismatch = errors.New("host key mismatch")
	ErrHostUnknown     = errors.New("host not in known_hosts")
	ErrAuthFailed      = errors.New("authentication failed")
	ErrUnreachable     = errors.New("host unreachable")
	ErrConnectionLost  = errors.New("connection lost")
	ErrConfig          = errors.New("bad ssh settings")
)

// Retryable reports whether retrying could help.
func Retryable(err error) bool {
	return !errors.Is(err, ErrHostKeyMismatch) && !errors.Is(err, ErrHostUnknown) &&
		!errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrConfig)
}

// HostKeyError is a host key that did not match known_hosts.
type HostKeyError struct {
	Node      string
	Address   string
	Presented string   // SHA256 fingerprint of the key the host presented
	Expected  []string // fingerprints known_hosts holds for the host
	File      string
}

func (e *HostKeyError) Error() string {
	return fmt.Sprintf("host key mismatch for %s (%s): it presented %s but %s expects %v; if the host was reinstalled, verify the new key out of band and update known_hosts",
		e.Node, e.Address, e.Presented, e.File, e.Expected)
}

func (e *HostKeyError) Unwrap() error { return ErrHostKeyMismatch }
