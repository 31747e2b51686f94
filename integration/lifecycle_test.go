package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/workflows"
)

// startWorker runs `kedge worker` as its own process on a task queue,
// serving the inventories given (default: the world's).
func startWorker(t testing.TB, queue string, inventories ...string) *exec.Cmd {
	t.Helper()
	return startWorkerEnv(t, queue, nil, inventories...)
}

// startWorkerEnv is startWorker with env added to the worker's
// environment.
func startWorkerEnv(t testing.TB, queue string, env []string, inventories ...string) *exec.Cmd {
	t.Helper()
	if len(inventories) == 0 {
		inventories = []string{world.inventory}
	}
	args := []string{"worker", "--address", world.srv.FrontendAddress(), "--task-queue", queue}
	for _, inv := range inventories {
		args = append(args, "--clusters", inv)
	}
	cmd := exec.Command(world.kedgeBin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func startRun(t *testing.T, file string, args ...string) string {
	t.Helper()
	out, errOut, code := kedge(t, append([]string{"run", file, "--inventory", world.inventory, "--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("kedge run: exit %d: %s", code, errOut)
	}
	var started struct {
		WorkflowID string `json:"workflowId"`
		URL        string `json:"url"`
	}
	if err := json.Unmarshal([]byte(out), &started); err != nil || started.WorkflowID == "" {
		t.Fatalf("kedge run printed %q (%v)", out, err)
	}
	if !strings.Contains(started.URL, "/namespaces/default/workflows/") {
		t.Errorf("no Web UI link: %q", started.URL)
	}
	return started.WorkflowID
}

func watch(t *testing.T, id string) (workflows.Progress, int) {
	t.Helper()
	out, errOut, code := kedge(t, "watch", id, "--output", "json")
	var p workflows.Progress
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("kedge watch %s: exit %d (%v): %s %s", id, code, err, out, errOut)
	}
	return p, code
}

func lines(t *testing.T, h, path, word string) int {
	t.Helper()
	data, err := labHost(t, h).ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), word)
}

func TestResumeAfterWorkerKilled(t *testing.T) {
	mainLane.join(t)
	const queue = "resume"
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: resume}
steps:
  - id: one
    action: host.run
    on: worker-1
    with: {command: "mkdir -p /var/lib/resume && echo one >> /var/lib/resume/log"}
  - id: two
    needs: [one]
    action: host.run
    on: worker-1
    with: {command: "echo two-start >> /var/lib/resume/log; sleep 6; echo two-end >> /var/lib/resume/log"}
  - id: three
    needs: [two]
    action: host.run
    on: worker-1
    with: {command: "echo three >> /var/lib/resume/log"}
`)
	first := startWorker(t, queue)
	id := startRun(t, rb, "--task-queue", queue)
	eventually(t, 30*time.Second, "step two to start", func() bool {
		return lines(t, "worker-1", "/var/lib/resume/log", "two-start") == 1
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	startWorker(t, queue)

	p, code := watch(t, id)
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("runbook did not complete after the worker was replaced: exit %d %+v", code, p)
	}
	if n := lines(t, "worker-1", "/var/lib/resume/log", "one"); n != 1 {
		t.Errorf("completed step one ran %d times", n)
	}
	if n := lines(t, "worker-1", "/var/lib/resume/log", "two-start"); n != 2 {
		t.Errorf("interrupted step two started %d times, want 2 (killed attempt + retry)", n)
	}
	// The killed worker's attempt died with its SSH connection: it never
	// finished beside the retry.
	if n := lines(t, "worker-1", "/var/lib/resume/log", "two-end"); n != 1 {
		t.Errorf("step two finished %d times, want 1 (the killed attempt must stop with its connection)", n)
	}
	if n := lines(t, "worker-1", "/var/lib/resume/log", "three"); n != 1 {
		t.Errorf("step three ran %d times", n)
	}
	if s := step(t, p, "two"); s.Attempts != 2 {
		t.Errorf("step two attempts = %d, want 2", s.Attempts)
	}
}

func TestCancelStopsRunningStepsAndUndoes(t *testing.T) {
	mainLane.join(t)
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: cancel-me}
steps:
  - id: write
    action: host.write-file
    on: worker-2
    with: {path: /etc/cancel/marker, content: "x\n"}
    undo:
      action: host.restore-file
      with:
        path: /etc/cancel/marker
        backup: ${ steps.write.outputs.backup }
        existed: ${ steps.write.outputs.existed }
  - id: long
    needs: [write]
    action: host.run
    on: worker-2
    with: {command: "echo started > /var/lib/cancel-long; sleep 60; echo finished >> /var/lib/cancel-long"}
`)
	id := startRun(t, rb)
	eventually(t, 30*time.Second, "the long step to start", func() bool {
		return hostFileExists(t, "worker-2", "/var/lib/cancel-long")
	})
	if _, errOut, code := kedge(t, "cancel", id); code != 0 {
		t.Fatalf("cancel: %s", errOut)
	}
	start := time.Now()
	p, code := watch(t, id)
	if code == 0 || p.State != workflows.StateCancelled {
		t.Fatalf("want cancelled, got exit %d state %s", code, p.State)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("cancellation took %s: the running command was not stopped", time.Since(start))
	}
	if hostFileExists(t, "worker-2", "/etc/cancel/marker") {
		t.Error("completed step was not undone on cancel")
	}
	recordHistory(t, id, "cancel")
	if s := step(t, p, "long"); s.State != workflows.StateCancelled {
		t.Errorf("long = %+v", s)
	}
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(readHostFile(t, "worker-2", "/var/lib/cancel-long"), "finished") {
		t.Error("the cancelled command ran to its end")
	}
}

func TestApprovalFromTheCLI(t *testing.T) {
	mainLane.join(t)
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: gated}
steps:
  - id: gate
    approval: {prompt: "Go on with the controllers?"}
  - id: after
    needs: [gate]
    action: host.run
    on: controller-1
    with: {command: "touch /var/lib/approved"}
`)
	id := startRun(t, rb)
	eventually(t, 20*time.Second, "the gate to wait", func() bool { return gateWaiting(id) })
	out, errOut, code := kedge(t, "approve", id, "--by", "alice", "--comment", "ok", "--output", "json")
	if code != 0 {
		t.Fatalf("approve: %s", errOut)
	}
	if !strings.Contains(out, `"by": "alice"`) {
		t.Errorf("approve printed %s", out)
	}
	_, _, code = kedge(t, "approve", id, "--step", "gate", "--by", "mallory")
	p, wcode := watch(t, id)
	if wcode != 0 || !hostFileExists(t, "controller-1", "/var/lib/approved") {
		t.Fatalf("runbook did not go on after approval: %+v", p)
	}
	if code == 0 {
		t.Error("a second decision on a decided step was accepted")
	}
	recordHistory(t, id, "approval")
	if d := step(t, p, "gate").Decision; d == nil || d.By != "alice" {
		t.Errorf("decision not recorded: %+v", d)
	}
}

// An approval inside a child runbook is decided from the CLI with the ID
// of the run the operator started, as chat does: `kedge approve` finds the
// gate under the run, records the approver on the child's step, and the
// parent goes on once the child is done.
func TestApprovalInAChildRunbookFromTheCLI(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gated-child.yaml"), []byte(`
apiVersion: kedge/v1
kind: Runbook
metadata: {name: gated-child}
steps:
  - id: gate
    approval: {prompt: "Restart the controllers?"}
  - id: after
    needs: [gate]
    action: host.run
    on: controller-1
    with: {command: "touch /var/lib/child-approved"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(dir, "gated-parent.yaml")
	if err := os.WriteFile(parent, []byte(`
apiVersion: kedge/v1
kind: Runbook
metadata: {name: gated-parent}
steps:
  - id: child
    runbook: gated-child
  - id: done
    needs: [child]
    action: host.run
    on: controller-1
    with: {command: "touch /var/lib/parent-done"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	id := startRun(t, parent)
	var child string
	eventually(t, 30*time.Second, "the child's gate to wait", func() bool {
		p, err := queryProgress(id)
		if err != nil || len(p.Steps) == 0 || p.Steps[0].Child == "" {
			return false
		}
		child = p.Steps[0].Child
		return gateWaiting(child)
	})
	// The parent itself has no approval step: before `kedge approve` looked
	// under the run, this was refused ("0 steps waiting").
	out, errOut, code := kedge(t, "approve", id, "--by", "alice", "--comment", "from the top", "--output", "json")
	if code != 0 {
		t.Fatalf("approve %s: exit %d: %s", id, code, errOut)
	}
	var d workflows.Decision
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Step != "gate" || d.By != "alice" || d.Decision != workflows.DecisionApprove {
		t.Fatalf("approve printed %s (%v)", out, err)
	}
	p, wcode := watch(t, id)
	if wcode != 0 || !hostFileExists(t, "controller-1", "/var/lib/child-approved") || !hostFileExists(t, "controller-1", "/var/lib/parent-done") {
		t.Fatalf("the run did not go on after the child's approval: %+v", p)
	}
	cp, err := queryProgress(child)
	if err != nil {
		t.Fatal(err)
	}
	if got := step(t, cp, "gate").Decision; got == nil || got.By != "alice" || got.Comment != "from the top" {
		t.Errorf("the child's gate recorded %+v", got)
	}
	_, _ = labHost(t, "controller-1").Exec(t.Context(), "rm", "-f", "/var/lib/child-approved", "/var/lib/parent-done")
}

func gateWaiting(id string) bool {
	p, err := queryProgress(id)
	if err != nil {
		return false
	}
	for _, s := range p.Steps {
		if s.ID == "gate" && s.State == workflows.StateWaiting {
			return true
		}
	}
	return false
}

func TestInvalidRunbookStartsNothing(t *testing.T) {
	mainLane.join(t)
	// The runs of the two runbooks it tries: the other lanes start runs
	// of their own on the same Temporal meanwhile.
	before := countRuns(t, "bad") + countRuns(t, "hello")
	bad := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: bad}
steps:
  - id: one
    action: host.rnu
    on: worker-1
`)
	_, errOut, code := kedge(t, "run", bad, "--inventory", world.inventory, "--wait")
	if code != 1 || !strings.Contains(errOut, filepath.Base(bad)+":7:13: step one: unknown action") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	good, _ := filepath.Abs("../examples/hello.yaml")
	_, errOut, code = kedge(t, "run", good, "--inventory", world.inventory, "--set", "nodes=worker-9")
	if code != 1 || !strings.Contains(errOut, `no node "worker-9"`) {
		t.Errorf("bad param: exit %d, stderr %q", code, errOut)
	}
	if after := countRuns(t, "bad") + countRuns(t, "hello"); after != before {
		t.Errorf("an invalid run started a workflow: %d -> %d", before, after)
	}
}

// countRuns counts the runs of a runbook.
func countRuns(t *testing.T, runbook string) int {
	t.Helper()
	out, errOut, code := kedge(t, "list", "--runbook", runbook, "--output", "json", "--limit", "1000")
	if code != 0 {
		t.Fatalf("list: %s", errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("list json: %v: %s", err, out)
	}
	return len(rows)
}
