package devserver

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.temporal.io/server/common/log/tag"
)

// The server exits the process on a fatal error (a port it cannot bind);
// with no logger given, the reason still reaches stderr.
func TestAFatalErrorIsNeverSilent(t *testing.T) {
	if os.Getenv("KEDGE_DEVSERVER_FATAL") == "1" {
		newServerLog(nil).Fatal("Failed to start gRPC listener", tag.NewStringTag("address", "127.0.0.1:7233"))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAFatalErrorIsNeverSilent$")
	cmd.Env = append(os.Environ(), "KEDGE_DEVSERVER_FATAL=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the process did not exit 1: %v\n%s", err, out)
	}
	for _, want := range []string{"Failed to start gRPC listener", "127.0.0.1:7233"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stderr does not say %q:\n%s", want, out)
		}
	}
}
