package vaultapi

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/activities/sshpool"

	"kedge.dev/kedge/actions/target"
)

// A Vault that is down or failing makes an SSH step retry (unreachable);
// a Vault that refuses the request fails it at once.
func TestSSHSignersClassifiesVaultFailures(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "test-token")
	answer := func(code int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	for _, c := range []struct {
		name, addr string
		retryable  bool
	}{
		{"down", closed, true},
		{"sealed", answer(http.StatusServiceUnavailable, `{"errors":["Vault is sealed"]}`), true},
		{"principal refused", answer(http.StatusBadRequest, `{"errors":["root is not a valid value for valid_principals"]}`), false},
		{"denied", answer(http.StatusForbidden, `{"errors":["permission denied"]}`), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &Activities{}
			_, err := a.SSHSigners(t.Context(), target.SSH{Node: "n1", Address: "127.0.0.1",
				VaultCA: &target.VaultCA{Address: c.addr, Mount: "ssh-client-signer", Role: "kedge"}})
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, sshpool.ErrUnreachable); got != c.retryable {
				t.Errorf("unreachable = %v, want %v: %v", got, c.retryable, err)
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.NonRetryable() == c.retryable {
				t.Errorf("application error %v", err)
			}
		})
	}
}
