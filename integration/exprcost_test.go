package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"kedge.dev/kedge/workflows"
)

// A runbook author writes a step whose input computes over
// lists.range(params.n): validation cannot size a param, so `kedge run`
// lets it through, and n=30000000 is given at the start. It made the
// workflow task panic ("Potential deadlock detected") and be retried for
// ever while the worker grew from 198 MB to 4.8 GB. Now the step fails
// once with the cost error, the workflow task never fails, and the
// worker process that runs it (its own `kedge worker`, so what is measured
// is the worker alone: its peak resident set, VmHWM in /proc/PID/status)
// stays under 300 MB.
func TestCostlyExpressionFailsItsStepAndTheWorkerStaysSmall(t *testing.T) {
	mainLane.join(t)
	const queue = "exprcost"
	worker := startWorker(t, queue)
	pid := worker.Process.Pid
	eventually(t, time.Minute, "the worker to start", func() bool { return statusKB(pid, "VmRSS") > 0 })

	// Past 1 GB the worker is killed: on code without the limit the run
	// would otherwise take the machine's memory.
	const killAt = 1 << 20 // kB
	var mu sync.Mutex
	var peakSeen, killedAt int64
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rss := statusKB(pid, "VmRSS")
			mu.Lock()
			peakSeen = max(peakSeen, rss)
			if rss > killAt && killedAt == 0 {
				killedAt = rss
				_ = worker.Process.Kill()
			}
			mu.Unlock()
		}
	}()
	defer close(done)

	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: exprcost}
params:
  n: {type: int, default: 3}
steps:
  - id: sibling
    action: host.run
    on: worker-2
    with: {command: "true"}
  - id: costly
    needs: [sibling]
    action: host.run
    on: worker-1
    with:
      command: echo "$COUNT"
      env: {COUNT: "${ string(lists.range(params.n + size(steps.sibling.outputs.stdout)).map(i, i * 2).size()) }"}
`)
	// Written with params alone, the expression is evaluated when the run
	// is planned: kedge run refuses it, with the limit, and starts
	// nothing. Reading an earlier step's output, it can only be evaluated
	// by the workflow, which is what this test is for.
	static := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: exprcost}
params:
  n: {type: int, default: 3}
steps:
  - id: costly
    action: host.run
    on: worker-1
    with:
      command: echo "$COUNT"
      env: {COUNT: "${ string(lists.range(params.n).map(i, i * 2).size()) }"}
`)
	if _, errOut, code := kedge(t, "run", static, "--inventory", world.inventory, "--task-queue", queue, "--set", "n=30000000"); code == 0 ||
		!strings.Contains(errOut, "expression cost limit exceeded: lists.range(30000000)") {
		t.Errorf("kedge run of a costly expression in params alone: exit %d, %s", code, errOut)
	}
	// A control run first: the same expression over three items, so the
	// worker has done what any run makes it do (connections, caches).
	control := startRun(t, rb, "--task-queue", queue, "--set", "n=3")
	runClosed(t, control, func() int64 { mu.Lock(); defer mu.Unlock(); return killedAt })
	if p, _ := watch(t, control); p.State != workflows.StateSucceeded {
		t.Fatalf("control run: %s %+v", p.State, p.Steps)
	}
	afterControl := statusKB(pid, "VmHWM")

	id := startRun(t, rb, "--task-queue", queue, "--set", "n=30000000")
	t.Cleanup(func() {
		_ = world.client.TerminateWorkflow(context.Background(), id, "", "exprcost test over")
	})
	runClosed(t, id, func() int64 { mu.Lock(); defer mu.Unlock(); return killedAt })

	hwm := statusKB(pid, "VmHWM")
	mu.Lock()
	seen := peakSeen
	mu.Unlock()
	t.Logf("worker pid %d: peak resident set (VmHWM) %d MB after the control run (n=3), %d MB after the attack (n=30000000); highest VmRSS sampled every 20 ms: %d MB", pid, afterControl>>10, hwm>>10, seen>>10)
	if hwm <= 0 || hwm > 300<<10 {
		t.Errorf("worker peak resident set %d kB, want under 300 MB", hwm)
	}
	if grew := hwm - afterControl; grew > 64<<10 {
		t.Errorf("the attack grew the worker's peak by %d MB", grew>>10)
	}

	p, code := watch(t, id)
	if p.State != workflows.StateFailed {
		t.Fatalf("run: exit %d state %s, want failed", code, p.State)
	}
	s := step(t, p, "costly")
	if s.State != workflows.StateFailed || s.Attempts > 1 || !strings.Contains(s.LastError, "expression cost limit exceeded: lists.range(30000000) would make 30000000 items") {
		t.Errorf("costly = %+v", s)
	}
	if s := step(t, p, "sibling"); s.State != workflows.StateSucceeded {
		t.Errorf("sibling = %+v", s)
	}
	if n := workflowTaskFailures(t, id); n > 0 {
		t.Errorf("%d workflow task failures", n)
	}
}

// runClosed waits for a run to close, failing at once should the worker
// be killed for its memory (killed gives its size then) or a workflow task
// fail.
func runClosed(t *testing.T, id string, killed func() int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if kb := killed(); kb != 0 {
			t.Fatalf("the worker reached %d MB and was killed", kb>>10)
		}
		if n := workflowTaskFailures(t, id); n > 0 {
			t.Fatalf("%s: %d workflow task failures (the expression must fail its step, not the workflow task)", id, n)
		}
		d, err := world.client.DescribeWorkflowExecution(t.Context(), id, "")
		if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still open after 3 minutes (last describe error: %v)", id, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// statusKB reads one kB field of /proc/PID/status (0 if unreadable).
func statusKB(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}

// workflowTaskFailures counts the failed workflow tasks in a run's history.
func workflowTaskFailures(t *testing.T, id string) int {
	t.Helper()
	n := 0
	it := world.client.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return n
		}
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			n++
		}
	}
	return n
}
