package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/workflows"
)

func TestHelloExampleRunsOnEveryHostAndIsIdempotent(t *testing.T) {
	mainLane.join(t)
	example, _ := filepath.Abs("../examples/hello.yaml")
	p, code, errOut := runWait(t, example, "--set", "greeting=hi")
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("hello failed: exit %d state %s: %s\n%+v", code, p.State, errOut, p)
	}
	for _, h := range []string{"controller-1", "worker-1", "worker-2"} {
		got := readHostFile(t, h, "/etc/kedge-hello/greeting")
		if !strings.HasPrefix(got, "hi from "+h+" (kernel ") {
			t.Errorf("%s greeting = %q", h, got)
		}
		out, err := labHost(t, h).Exec(t.Context(), "systemctl", "is-active", "kedge-hello.service")
		if err != nil || strings.TrimSpace(string(out)) != "active" {
			t.Errorf("%s: kedge-hello.service is %q (%v)", h, out, err)
		}
	}
	recordHistory(t, p.WorkflowID, "hello")
	if s := step(t, p, "facts"); len(s.Hosts) != 3 || s.Attempts != 1 {
		t.Errorf("facts = %+v", s)
	}

	// A second run changes nothing on the hosts: same inode, no backup.
	before := inode(t, "worker-1", "/etc/kedge-hello/greeting")
	p, code, errOut = runWait(t, example, "--set", "greeting=hi")
	if code != 0 {
		t.Fatalf("second run failed: %s %+v", errOut, p)
	}
	if after := inode(t, "worker-1", "/etc/kedge-hello/greeting"); after != before {
		t.Errorf("unchanged file was rewritten (inode %s -> %s)", before, after)
	}
}

func inode(t *testing.T, h, path string) string {
	t.Helper()
	out, err := labHost(t, h).Exec(t.Context(), "stat", "-c", "%i", path)
	if err != nil {
		t.Fatalf("stat %s on %s: %v", path, h, err)
	}
	return strings.TrimSpace(string(out))
}

func TestParallelBranchesOverlap(t *testing.T) {
	mainLane.join(t)
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: branches}
steps:
  - id: left
    action: host.run
    on: worker-1
    with: {command: "sleep 1"}
  - id: right
    action: host.run
    on: worker-2
    with: {command: "sleep 1"}
  - id: join
    needs: [left, right]
    action: host.run
    on: controller-1
    with: {command: "true"}
`)
	p, code, errOut := runWait(t, rb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	left, right, join := step(t, p, "left"), step(t, p, "right"), step(t, p, "join")
	if !left.StartedAt.Before(*right.EndedAt) || !right.StartedAt.Before(*left.EndedAt) {
		t.Errorf("branches did not overlap: left %v-%v right %v-%v", left.StartedAt, left.EndedAt, right.StartedAt, right.EndedAt)
	}
	if join.StartedAt.Before(*left.EndedAt) || join.StartedAt.Before(*right.EndedAt) {
		t.Errorf("join started before its needs ended")
	}
}

func TestStepFailsTwiceThenSucceeds(t *testing.T) {
	mainLane.join(t)
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: flaky}
steps:
  - id: flaky
    action: host.run
    on: worker-1
    retry: {maxAttempts: 5, initialInterval: 200ms, backoff: 1.0}
    with:
      command: |
        n=$(cat /var/lib/flaky-count 2>/dev/null || echo 0)
        n=$((n+1)); echo $n > /var/lib/flaky-count
        [ "$n" -ge 3 ] || { echo "attempt $n fails" >&2; exit 7; }
`)
	p, code, errOut := runWait(t, rb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recordHistory(t, p.WorkflowID, "retry")
	s := step(t, p, "flaky")
	if s.Attempts != 3 || !strings.Contains(s.LastError, "attempt 2 fails") {
		t.Errorf("flaky = %+v", s)
	}
	if got := strings.TrimSpace(readHostFile(t, "worker-1", "/var/lib/flaky-count")); got != "3" {
		t.Errorf("command ran %s times, want 3", got)
	}
}

func TestWhenAndOutputsFlow(t *testing.T) {
	mainLane.join(t)
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: outputs}
steps:
  - id: decide
    action: host.run
    on: worker-2
    with:
      command: |
        echo "color=blue" >> "$KEDGE_OUTPUT"
        echo "count=2" >> "$KEDGE_OUTPUT"
  - id: blue
    needs: [decide]
    when: steps.decide.outputs.outputs.color == 'blue'
    action: host.write-file
    on: worker-2
    with:
      path: /etc/outputs/blue
      content: "count=${ steps.decide.outputs.outputs.count }\n"
  - id: red
    needs: [decide]
    when: steps.decide.outputs.outputs.color == 'red'
    action: host.write-file
    on: worker-2
    with: {path: /etc/outputs/red, content: red}
`)
	p, code, errOut := runWait(t, rb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := readHostFile(t, "worker-2", "/etc/outputs/blue"); got != "count=2\n" {
		t.Errorf("blue = %q", got)
	}
	if hostFileExists(t, "worker-2", "/etc/outputs/red") {
		t.Error("red ran although its condition was false")
	}
	if s := step(t, p, "red"); s.State != workflows.StateSkipped {
		t.Errorf("red = %+v", s)
	}
}

func TestFailureUndoesCompletedStepsInReverse(t *testing.T) {
	mainLane.join(t)
	h := labHost(t, "worker-1")
	if err := h.WriteFile("/etc/undo/existing.conf", []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: saga}
steps:
  - id: new-file
    action: host.write-file
    on: worker-1
    with: {path: /etc/undo/new.conf, content: "new\n"}
    undo:
      action: host.restore-file
      with:
        path: /etc/undo/new.conf
        backup: ${ steps['new-file'].outputs.backup }
        existed: ${ steps['new-file'].outputs.existed }
  - id: overwrite
    needs: [new-file]
    action: host.write-file
    on: worker-1
    with: {path: /etc/undo/existing.conf, content: "changed\n"}
    undo:
      action: host.restore-file
      with:
        path: /etc/undo/existing.conf
        backup: ${ steps.overwrite.outputs.backup }
        existed: ${ steps.overwrite.outputs.existed }
  - id: log-undo-order
    needs: [overwrite]
    action: host.run
    on: worker-1
    with: {command: "echo forward >> /var/lib/undo-order"}
    undo:
      action: host.run
      with: {command: "echo undo-log >> /var/lib/undo-order; cat /etc/undo/existing.conf >> /var/lib/undo-order"}
  - id: boom
    needs: [log-undo-order]
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with: {command: "echo broken >&2; exit 3"}
`)
	p, code, _ := runWait(t, rb)
	if code == 0 || p.State != workflows.StateFailed {
		t.Fatalf("want failure, got exit %d state %s", code, p.State)
	}
	if s := step(t, p, "boom"); !strings.Contains(s.LastError, "broken") {
		t.Errorf("boom error does not carry stderr: %q", s.LastError)
	}
	if hostFileExists(t, "worker-1", "/etc/undo/new.conf") {
		t.Error("undo did not remove the file the runbook created")
	}
	if got := readHostFile(t, "worker-1", "/etc/undo/existing.conf"); got != "original\n" {
		t.Errorf("undo did not restore the overwritten file: %q", got)
	}
	// The run-step's undo ran before overwrite's undo: it still saw "changed".
	if got := readHostFile(t, "worker-1", "/var/lib/undo-order"); got != "forward\nundo-log\nchanged\n" {
		t.Errorf("undo order log = %q", got)
	}
	recordHistory(t, p.WorkflowID, "saga-undo")
	for _, id := range []string{"new-file", "overwrite", "log-undo-order"} {
		if s := step(t, p, id); s.Undo != workflows.StateUndone {
			t.Errorf("%s undo state = %q", id, s.Undo)
		}
	}
}

func TestWriteFileIsAtomic(t *testing.T) {
	mainLane.join(t)
	// Two 512 KiB contents; a reader loop on the host hashes the file as
	// fast as it can while Kedge replaces it, from before the first write
	// to after the last (marker files: on a busy machine a reader of a
	// fixed 4 s ended before the first write). Every read must be whole.
	a := strings.Repeat("a", 512<<10)
	b := strings.Repeat("b", 512<<10)
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	h := labHost(t, "worker-2")
	if out, err := h.Exec(t.Context(), "rm", "-f", "/var/lib/atomic-reading", "/var/lib/atomic-stop", "/var/lib/atomic-sums"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := h.WriteFile("/etc/atomic/data", []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
	reader := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: atomic-reader}
steps:
  - id: read
    action: host.run
    on: worker-2
    with:
      command: |
        end=$(( $(date +%s) + 300 ))
        touch /var/lib/atomic-reading
        while [ ! -e /var/lib/atomic-stop ] && [ "$(date +%s)" -lt "$end" ]; do sha256sum /etc/atomic/data | cut -d' ' -f1; done | sort | uniq -c >> /var/lib/atomic-sums
`)
	writer := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: atomic-writer}
params:
  content: {type: string, required: true}
steps:
  - id: write
    action: host.write-file
    on: worker-2
    with: {path: /etc/atomic/data, content: "${ params.content }"}
`)
	done := make(chan int)
	go func() { _, code, _ := runWaitNoT(reader); done <- code }()
	eventually(t, 2*time.Minute, "the reader reading", func() bool {
		_, err := h.ReadFile("/var/lib/atomic-reading")
		return err == nil
	})
	for i := range 4 {
		content := b
		if i%2 == 1 {
			content = a
		}
		if _, code, errOut := runWait(t, writer, "--set", "content="+content); code != 0 {
			t.Fatalf("write %d failed: %s", i, errOut)
		}
	}
	if err := h.WriteFile("/var/lib/atomic-stop", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Fatal("reader runbook failed")
	}
	sums := readHostFile(t, "worker-2", "/var/lib/atomic-sums")
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(sums), "\n") {
		f := strings.Fields(line)
		seen[f[len(f)-1]] = true
	}
	for s := range seen {
		if s != sum(a) && s != sum(b) {
			t.Errorf("a reader saw a partial file (sha256 %s); all: %s", s, sums)
		}
	}
	if !seen[sum(b)] {
		t.Errorf("reader never saw the new content: %s", sums)
	}
	out, _ := h.Exec(t.Context(), "ls", "-a", "/etc/atomic")
	if strings.Count(string(out), "\n") != 3 { // ., .., data
		t.Errorf("temporary files left behind: %q", out)
	}
}

// runWaitNoT is runWait for a goroutine (no t.Fatal off the test goroutine).
func runWaitNoT(file string) (workflows.Progress, int, string) {
	var out, errb strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), cliDeadline)
	defer cancel()
	code := mainWithServer(ctx, []string{"run", file, "--inventory", world.inventory, "--wait", "--output", "json"}, &out, &errb)
	return workflows.Progress{}, code, errb.String()
}

func TestHostKeyMismatchIsRefused(t *testing.T) {
	mainLane.join(t)
	// A known_hosts that pins worker-1's address to worker-2's key.
	var lines []string
	for _, h := range world.lab.Hosts {
		key := h.HostKeyPublic
		if h.Name == "worker-1" {
			key = labHost(t, "worker-2").HostKeyPublic
		}
		lines = append(lines, h.Address+" "+key)
	}
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, []byte(labInventory(world.lab, kh)), 0o644); err != nil {
		t.Fatal(err)
	}
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: mismatch}
steps:
  - id: touch
    action: host.run
    on: worker-1
    retry: {maxAttempts: 5}
    with: {command: "touch /var/lib/mismatch-ran"}
`)
	out, errOut, code := kedge(t, "run", rb, "--inventory", inv, "--wait", "--output", "json")
	if code == 0 {
		t.Fatalf("a host with the wrong key was trusted: %s", out)
	}
	for _, want := range []string{"worker-1", "SHA256:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("error does not name %q: %s", want, errOut)
		}
	}
	if strings.Count(errOut, "SHA256:") < 2 {
		t.Errorf("error should name both fingerprints: %s", errOut)
	}
	if hostFileExists(t, "worker-1", "/var/lib/mismatch-ran") {
		t.Error("the command ran on a host whose key did not match")
	}
	if !strings.Contains(out, `"attempts": 1`) {
		t.Errorf("a host key mismatch was retried: %s", out)
	}
}

// A run that fails after a child runbook and a rollout of child runbooks
// completed undoes what they did, newest first, before the steps' own
// undo lists (workflows' undo-children): every file they wrote is gone.
func TestFailureUndoesCompletedChildRunbooks(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	for name, body := range map[string]string{"undo-child.yaml": `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: undo-child}
params:
  node: {type: string, required: true}
  tag: {type: string, required: true}
steps:
  - id: write
    action: host.write-file
    on: ${ params.node }
    with: {path: "/etc/undo/child-${ params.tag }.conf", content: "child\n"}
    undo:
      - action: host.restore-file
        with:
          path: "/etc/undo/child-${ params.tag }.conf"
          backup: ${ steps.write.outputs.backup }
          existed: ${ steps.write.outputs.existed }
      - action: host.run
        with: {command: "echo undo \"$TAG\" >> /var/lib/undo-children", env: {TAG: "${ params.tag }"}}
`, "undo-parent.yaml": `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: undo-parent}
steps:
  - id: one
    runbook: undo-child
    with: {node: worker-1, tag: one}
  - id: many
    needs: [one]
    runbook: undo-child
    rollout: {over: "${ ['worker-1', 'worker-2'] }", maxUnavailable: 1}
    with: {node: "${ item }", tag: "many-${ item }"}
  - id: boom
    needs: [many]
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with: {command: "echo broken >&2; exit 3"}
`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, code, _ := runWait(t, filepath.Join(dir, "undo-parent.yaml"))
	if code == 0 || p.State != workflows.StateFailed {
		t.Fatalf("want failure, got exit %d state %s", code, p.State)
	}
	for node, files := range map[string][]string{"worker-1": {"one", "many-worker-1"}, "worker-2": {"many-worker-2"}} {
		for _, f := range files {
			if hostFileExists(t, node, "/etc/undo/child-"+f+".conf") {
				t.Errorf("%s: the child's /etc/undo/child-%s.conf is still there", node, f)
			}
		}
	}
	// The rollout's children are undone before the first child, the
	// newest first: worker-2's then worker-1's.
	if got := readHostFile(t, "worker-1", "/var/lib/undo-children"); got != "undo many-worker-1\nundo one\n" {
		t.Errorf("worker-1's undo log = %q", got)
	}
	if got := readHostFile(t, "worker-2", "/var/lib/undo-children"); got != "undo many-worker-2\n" {
		t.Errorf("worker-2's undo log = %q", got)
	}
	recordHistory(t, p.WorkflowID, "undo-children")
	for _, n := range []string{"worker-1", "worker-2"} {
		_, _ = labHost(t, n).Exec(t.Context(), "rm", "-f", "/var/lib/undo-children")
	}
}
