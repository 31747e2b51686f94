package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/internal/devserver"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

// A Temporal with mutual TLS, as the team install runs it: certificates
// from `kedge setup tls`; a `kedge worker` and `kedge run` that present
// theirs run a runbook on a host; a client with no certificate, with only
// the CA, or with a certificate from another CA gets nothing.
func TestTemporalWithMutualTLS(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "tls")
	if _, errOut, code := kedge(t, "setup", "tls", "--out", certs, "--client", "kedge-worker", "--client", "operator"); code != 0 {
		t.Fatalf("kedge setup tls: exit %d: %s", code, errOut)
	}
	other := filepath.Join(dir, "other")
	if _, errOut, code := kedge(t, "setup", "tls", "--out", other, "--client", "operator"); code != 0 {
		t.Fatalf("kedge setup tls (another CA): exit %d: %s", code, errOut)
	}
	srv, err := devserver.Start(t.Context(), devserver.Config{
		DataDir: filepath.Join(dir, "temporal"), FrontendAddr: "127.0.0.1:0", Namespace: "default",
		TLS: &devserver.TLS{CertFile: filepath.Join(certs, "server.pem"), KeyFile: filepath.Join(certs, "server.key"),
			CAFile: filepath.Join(certs, "ca.pem"), ServerName: "temporal"},
	})
	if err != nil {
		t.Fatalf("start Temporal with mutual TLS: %v", err)
	}
	defer srv.Stop()
	tlsArgs := func(dir, client string) []string {
		return []string{"--tls-cert-path", filepath.Join(dir, client+".pem"), "--tls-key-path", filepath.Join(dir, client+".key"),
			"--tls-ca-path", filepath.Join(certs, "ca.pem"), "--tls-server-name", "temporal"}
	}
	const queue = "mtls"
	w := exec.Command(world.kedgeBin, append([]string{"worker", "--address", srv.FrontendAddress(), "--task-queue", queue,
		"--clusters", world.inventory}, tlsArgs(certs, "kedge-worker")...)...)
	w.Stdout, w.Stderr = os.Stderr, os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Process.Kill(); _ = w.Wait() }()

	const marker = "/tmp/kedge-mtls"
	_, _ = labHost(t, "worker-2").Exec(t.Context(), "rm", "-f", marker)
	rb := writeRunbook(t, `apiVersion: kedge/v1
kind: Runbook
metadata: {name: over-mtls}
steps:
  - id: touch
    action: host.run
    on: worker-2
    with: {command: "touch `+marker+`"}
`)
	run := func(extra ...string) (string, string, int) {
		var out, errOut strings.Builder
		args := append([]string{"kedge", "run", rb, "--inventory", world.inventory, "--address", srv.FrontendAddress(),
			"--task-queue", queue, "--wait", "--output", "json", "--connect-timeout", "2s"}, extra...)
		code := starter.Main(args, starter.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
		return out.String(), errOut.String(), code
	}
	for name, extra := range map[string][]string{
		"no TLS":                      nil,
		"TLS without a certificate":   {"--tls-ca-path", filepath.Join(certs, "ca.pem"), "--tls-server-name", "temporal"},
		"a certificate of another CA": tlsArgs(other, "operator"),
	} {
		if out, errOut, code := run(extra...); code != starter.ExitUnreachable || !strings.Contains(errOut, "cannot reach Temporal") {
			t.Errorf("%s: exit %d, want refused\nstdout: %s\nstderr: %s", name, code, out, errOut)
		}
	}
	if out, err := labHost(t, "worker-2").Exec(t.Context(), "test", "-e", marker); err == nil {
		t.Fatalf("a client without a good certificate ran something: %s", out)
	}

	workerServes(world.inventory)
	out, errOut, code := run(tlsArgs(certs, "operator")...)
	var p workflows.Progress
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("with the operator's certificate: exit %d (%v)\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	if out, err := labHost(t, "worker-2").Exec(t.Context(), "test", "-e", marker); err != nil {
		t.Errorf("the run over mutual TLS did not touch the host: %v %s", err, out)
	}
}
