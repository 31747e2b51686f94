package sshpool

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"kedge.dev/kedge/actions/target"
)

// A failed handshake is a refused login only when x/crypto/ssh's text
// says so (it has no type for it); anything else is a host not reached.
func TestClassifyHandshake(t *testing.T) {
	tg := target.SSH{Node: "worker-1", Address: "10.0.0.1", Port: 22}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"no method got through", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain"), ErrAuthFailed},
		{"too many attempts", errors.New("ssh: handshake failed: ssh: disconnect, reason 2: Too many authentication failures"), ErrAuthFailed},
		{"the host hung up", fmt.Errorf("ssh: handshake failed: %w", io.EOF), ErrUnreachable},
		{"a read timed out", fmt.Errorf("ssh: handshake failed: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), ErrUnreachable},
		{"a configuration error", fmt.Errorf("worker-1: %w", ErrConfig), ErrConfig},
	} {
		got := classifyHandshake(tg, nil, c.err)
		if !errors.Is(got, c.want) || !isClassified(got) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
