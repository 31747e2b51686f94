package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

// startDev runs `kedge dev` (Temporal on SQLite in dataDir, its worker)
// as its own process on addr, returning once it says its worker polls:
// its server is up and has Kedge's search attributes. (Waiting for
// something to answer on addr is not enough: a port freed by another test
// can be answered by another server.)
func startDev(t *testing.T, dataDir, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(world.kedgeBin, "dev", "--data-dir", dataDir, "--address", addr, "--ui-address", "",
		"--webhook-address", "", "--clusters", world.inventory, "--codec-key", world.codecKey)
	out, err := cmd.StderrPipe() // where kedge dev says what it runs
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, sc.Text())
			if strings.HasPrefix(sc.Text(), "kedge dev: worker polling task queue") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(os.Stderr, out)
	}()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatalf("kedge dev on %s did not say its worker polls within 2m", addr)
	}
	return cmd
}

// devCLI runs the CLI against a `kedge dev` at addr.
func devCLI(t *testing.T, addr string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliDeadline)
	defer cancel()
	var out, errb strings.Builder
	full := append([]string{"kedge", args[0], "--address", addr, "--connect-timeout", "2s"}, args[1:]...)
	code := starter.MainContext(ctx, full, starter.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	if ctx.Err() != nil {
		t.Errorf("kedge %s: still running after %s", strings.Join(args, " "), cliDeadline)
	}
	return out.String(), errb.String(), code
}

// TestDevServerKilledMidRunResumes: `kedge dev` (Temporal on SQLite and
// the worker, one process) killed -9 mid-step and started again on the
// same data directory; the run goes on from its history: completed steps
// are not run again, the interrupted one is retried once.
func TestDevServerKilledMidRunResumes(t *testing.T) {
	mainLane.join(t)
	// A loopback address of its own: the server comes back on it after
	// the kill, and no other test's server can take it meanwhile.
	const addr = "127.0.47.1:7233"
	dataDir := filepath.Join(t.TempDir(), "dev")
	_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-rf", "/var/lib/devkill")
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: devkill}
steps:
  - id: one
    action: host.run
    on: worker-1
    with: {command: "mkdir -p /var/lib/devkill && echo one >> /var/lib/devkill/log"}
  - id: two
    needs: [one]
    action: host.run
    on: worker-1
    with: {command: "echo two-start >> /var/lib/devkill/log; sleep 6; echo two-end >> /var/lib/devkill/log"}
  - id: three
    needs: [two]
    action: host.run
    on: worker-1
    with: {command: "echo three >> /var/lib/devkill/log"}
`)
	dev := startDev(t, dataDir, addr)
	out, errOut, code := devCLI(t, addr, "run", rb, "--inventory", world.inventory, "--output", "json")
	var started struct {
		WorkflowID string `json:"workflowId"`
	}
	if err := json.Unmarshal([]byte(out), &started); code != 0 || err != nil {
		t.Fatalf("kedge run: exit %d (%v): %s %s", code, err, out, errOut)
	}
	eventually(t, time.Minute, "step two to start", func() bool {
		return lines(t, "worker-1", "/var/lib/devkill/log", "two-start") == 1
	})
	if err := dev.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	killed := time.Now()
	startDev(t, dataDir, addr)
	t.Logf("kedge dev answers again %s after kill -9", time.Since(killed).Round(time.Millisecond))

	out, errOut, code = devCLI(t, addr, "watch", started.WorkflowID, "--output", "json")
	var p workflows.Progress
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("the run did not complete after kedge dev came back: exit %d (%v)\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	t.Logf("run completed %s after the kill", time.Since(killed).Round(time.Millisecond))
	if n := lines(t, "worker-1", "/var/lib/devkill/log", "one"); n != 1 {
		t.Errorf("completed step one ran %d times", n)
	}
	if n := lines(t, "worker-1", "/var/lib/devkill/log", "two-start"); n != 2 {
		t.Errorf("interrupted step two started %d times, want 2 (killed attempt + retry)", n)
	}
	if n := lines(t, "worker-1", "/var/lib/devkill/log", "two-end"); n != 1 {
		t.Errorf("step two finished %d times, want 1 (the killed attempt stops with its connection)", n)
	}
	if n := lines(t, "worker-1", "/var/lib/devkill/log", "three"); n != 1 {
		t.Errorf("step three ran %d times", n)
	}
}
