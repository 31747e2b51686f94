package sshpool

import (
	"errors"
	"fmt"
	"strings"
)

// Classified errors. Every error this package returns wraps exactly one of
// them (or a context error), so callers classify with errors.Is and never
// by message. Mismatch, unknown host, auth failures and bad settings
// cannot be fixed by retrying; unreachable hosts and lost connections can.
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
		!errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrConfig) && !errors.Is(err, ErrPrivilege)
}

// HostKeyError is a host key that did not match known_hosts. It wraps
// ErrHostKeyMismatch.
type HostKeyError struct {
	Node      string
	Address   string
	Presented string   // SHA256 fingerprint of the key the host presented
	Expected  []string // fingerprints known_hosts holds for the host
	File      string
	// Offered, when set, is the host key types the host offered when none
	// of them is a type known_hosts holds for it (Presented is then empty).
	Offered []string
	// Revoked says the presented key is marked @revoked.
	Revoked bool
}

func (e *HostKeyError) Error() string {
	const advice = "; if the host was reinstalled, verify the new key out of band and update known_hosts"
	switch {
	case e.Revoked:
		return fmt.Sprintf("host key mismatch for %s (%s): it presented %s, which %s marks @revoked%s",
			e.Node, e.Address, e.Presented, e.File, advice)
	case len(e.Offered) > 0:
		return fmt.Sprintf("host key mismatch for %s (%s): it offers host keys of types %s but %s expects %s%s",
			e.Node, e.Address, strings.Join(e.Offered, ", "), e.File, strings.Join(e.Expected, ", "), advice)
	}
	return fmt.Sprintf("host key mismatch for %s (%s): it presented %s but %s expects %s%s",
		e.Node, e.Address, e.Presented, e.File, strings.Join(e.Expected, " or "), advice)
}

func (e *HostKeyError) Unwrap() error { return ErrHostKeyMismatch }

// UnknownHostError is a host that known_hosts has no entry for. Kedge
// never trusts a key on first use: the operator verifies it and adds it.
// It wraps ErrHostUnknown.
type UnknownHostError struct {
	Node      string
	Address   string // host:port dialled
	Presented string // SHA256 fingerprint of the key the host presented
	File      string
	// Scan is the ssh-keyscan command that prints the host's keys.
	Scan string
}

func (e *UnknownHostError) Error() string {
	return fmt.Sprintf("%s (%s) is not in %s; it presented %s: check that fingerprint out of band, then add the host (e.g. %s >> %s)",
		e.Node, e.Address, e.File, e.Presented, e.Scan, e.File)
}

func (e *UnknownHostError) Unwrap() error { return ErrHostUnknown }
