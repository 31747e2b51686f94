package starter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/internal/mtls"
)

// The Temporal client key is a secret like the codec key: one that
// others may read, or that another account owns (and so may replace), is
// refused before anything is dialled, naming the file.
func TestTemporalClientKeyMustBeTheReadersOwn(t *testing.T) {
	dir := t.TempDir()
	if _, err := mtls.Generate(mtls.Options{Dir: dir, ServerName: "temporal", Clients: []string{"operator"}}); err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "operator.pem"), filepath.Join(dir, "operator.key")
	dial := func() (string, int) {
		_, errOut, code := runCLI(t, "list", "--address", "127.0.0.1:1", "--connect-timeout", "1s",
			"--tls-cert-path", cert, "--tls-key-path", key, "--tls-ca-path", filepath.Join(dir, "ca.pem"))
		return errOut, code
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if errOut, code := dial(); code != ExitFailed || !strings.Contains(errOut, key) || !strings.Contains(errOut, "chmod 600") {
		t.Errorf("a client key others may read: exit %d %s", code, errOut)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(key, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if errOut, code := dial(); code != ExitFailed || !strings.Contains(errOut, key) || !strings.Contains(errOut, "uid 65534") {
			t.Errorf("a client key owned by uid 65534: exit %d %s", code, errOut)
		}
		if err := os.Chown(key, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The reader's own key is loaded: the CLI goes on to dial (and finds
	// nothing there).
	if errOut, code := dial(); code != ExitUnreachable {
		t.Errorf("the reader's own key: exit %d %s", code, errOut)
	}
}
