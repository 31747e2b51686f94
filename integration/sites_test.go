package integration

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/workflows"
)

// siteWorker runs `kedge worker` on one task queue under a name of its own,
// the way a site's worker runs beside the hosts it reaches. It returns the
// first match of want in the worker's stderr (nil want: none awaited).
func siteWorker(t *testing.T, queue, identity string, want *regexp.Regexp, args ...string) []string {
	t.Helper()
	cmd := exec.Command(world.kedgeBin, append([]string{"worker", "--address", world.srv.FrontendAddress(),
		"--task-queue", queue, "--identity", identity, "--clusters", world.inventory}, args...)...)
	cmd.Stdout = os.Stderr
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(os.Stderr, "[%s] %s\n", identity, line)
			if want != nil {
				if m := want.FindStringSubmatch(line); m != nil {
					found <- m
					want = nil
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	if want == nil {
		return nil
	}
	select {
	case m := <-found:
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("worker %s did not print %s", identity, want)
		return nil
	}
}

// queueKey is queue's key file, derived from the world's by `kedge codec
// derive`, as an operator gives one to a site's worker.
func queueKey(t *testing.T, queue string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), queue+".key")
	if _, errOut, code := kedge(t, "codec", "derive", "--queue", queue, "--out", out); code != 0 {
		t.Fatalf("kedge codec derive --queue %s: exit %d: %s", queue, code, errOut)
	}
	return out
}

// sitesInventory puts controller-1 and worker-1 on site A's queue (the
// cluster's) and worker-2 on site B's.
func sitesInventory(t *testing.T, name, siteA, siteB string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kedge/v1\nkind: Cluster\nmetadata: {name: %s}\ntaskQueue: %s\nssh:\n  user: core\n  become: sudo\n  identityFile: %s\n  knownHostsFile: %s\n",
		name, siteA, world.lab.IdentityFile, world.lab.KnownHostsFile)
	for i, h := range world.lab.Hosts {
		switch i {
		case 0:
			b.WriteString("controllers:\n")
		case 1:
			b.WriteString("workers:\n")
		}
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n    port: %d\n", h.Name, h.Address, h.Port)
		if h.Name == "worker-2" {
			fmt.Fprintf(&b, "    taskQueue: %s\n", siteB)
		}
	}
	p := filepath.Join(t.TempDir(), "sites.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Two workers on two task queues, one per site: each runs only the steps
// on its site's nodes (rollout children and undo included), and the
// world's worker on the default queue, which runs the workflows, runs
// none of them.
func TestSitesEachWorkerRunsOnlyItsSitesSteps(t *testing.T) {
	mainLane.join(t)
	inv := sitesInventory(t, "sites", "site-a", "site-b")
	// Each site's worker holds its queue's keys alone.
	siteWorker(t, "site-a", "kedge-site-a", regexp.MustCompile(`polling the activities of task queue site-a`), "--clusters", inv, "--codec-key", queueKey(t, "site-a"))
	siteWorker(t, "site-b", "kedge-site-b", regexp.MustCompile(`polling the activities of task queue site-b`), "--clusters", inv, "--codec-key", queueKey(t, "site-b"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "site-node.yaml"), []byte(`
apiVersion: kedge/v1
kind: Runbook
metadata: {name: site-node}
params:
  node: {type: string, required: true}
steps:
  - id: touch
    action: host.run
    on: ${ params.node }
    with: {command: "mkdir -p /var/lib/sites && echo rolled >> /var/lib/sites/log"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rb := filepath.Join(dir, "sites.yaml")
	if err := os.WriteFile(rb, []byte(`
apiVersion: kedge/v1
kind: Runbook
metadata: {name: sites}
params:
  nodes: {type: nodes, default: workers}
steps:
  - id: mark
    action: host.run
    on: all
    with: {command: "mkdir -p /var/lib/sites && echo marked >> /var/lib/sites/log"}
    undo:
      action: host.run
      with: {command: "echo unmarked >> /var/lib/sites/log"}
  - id: roll
    needs: [mark]
    runbook: site-node
    rollout: {over: "${ params.nodes }", maxUnavailable: 2}
    with: {node: "${ item }"}
  - id: boom
    needs: [roll]
    action: host.run
    on: worker-2
    retry: {maxAttempts: 1}
    with: {command: "exit 3"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, code, errOut := runWaitInv(t, rb, inv)
	if code == 0 || p.State != workflows.StateFailed {
		t.Fatalf("the run should fail at boom and undo: exit %d %s\n%+v", code, errOut, p)
	}
	t.Logf("run with undo across two sites: %s", time.Since(start).Round(time.Millisecond))

	acts := activitiesOf(t, p.WorkflowID)
	var got []string
	admits := 0
	for _, a := range acts {
		if a.kind == workflows.AdmitRunActivity {
			admits++ // the run's admission: workflow bookkeeping on its own queue, no host
			continue
		}
		if a.kind != "host.run" {
			t.Errorf("unexpected activity %+v", a)
			continue
		}
		got = append(got, fmt.Sprintf("%s %s on %s by %s", a.command, a.node, a.queue, a.identity))
	}
	if admits != 1 {
		t.Errorf("the run was admitted %d times, want once (its node runs are children: no admission check)", admits)
	}
	slices.Sort(got)
	const (
		mark   = "mkdir -p /var/lib/sites && echo marked >> /var/lib/sites/log"
		roll   = "mkdir -p /var/lib/sites && echo rolled >> /var/lib/sites/log"
		unmark = "echo unmarked >> /var/lib/sites/log"
	)
	want := []string{
		"exit 3 worker-2 on site-b by kedge-site-b",
		unmark + " controller-1 on site-a by kedge-site-a",
		unmark + " worker-1 on site-a by kedge-site-a",
		unmark + " worker-2 on site-b by kedge-site-b",
		mark + " controller-1 on site-a by kedge-site-a",
		mark + " worker-1 on site-a by kedge-site-a",
		mark + " worker-2 on site-b by kedge-site-b",
		roll + " worker-1 on site-a by kedge-site-a",
		roll + " worker-2 on site-b by kedge-site-b",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("activities (command node on queue by worker):\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// The hosts saw it all, once each.
	for _, h := range []string{"controller-1", "worker-1", "worker-2"} {
		log := readHostFile(t, h, "/var/lib/sites/log")
		wantLog := "marked\nrolled\nunmarked\n"
		if h == "controller-1" {
			wantLog = "marked\nunmarked\n"
		}
		if log != wantLog {
			t.Errorf("%s: /var/lib/sites/log = %q, want %q", h, log, wantLog)
		}
	}
}

// activity is one activity of a run or its children, as stored.
type activity struct {
	kind, node, command string
	queue               string // the task queue it was scheduled on
	identity            string // the worker that started it
}

// activitiesOf walks a run's history and its children's, decoding each
// activity's sealed input for the node and command it names.
func activitiesOf(t *testing.T, id string) []activity {
	t.Helper()
	var out []activity
	var walk func(id, runID string)
	walk = func(id, runID string) {
		byEvent := map[int64]*activity{}
		var order []int64
		it := world.client.GetWorkflowHistory(t.Context(), id, runID, false, 0)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s: %v", id, err)
			}
			switch {
			case e.GetActivityTaskScheduledEventAttributes() != nil:
				a := e.GetActivityTaskScheduledEventAttributes()
				var in struct {
					Target  struct{ Node string } `json:"target"`
					Node    string                `json:"node"`
					Command string                `json:"command"`
				}
				if err := world.codec.DataConverter().FromPayloads(a.GetInput(), &in); err != nil {
					t.Fatalf("decode input of %s in %s: %v", a.GetActivityType().GetName(), id, err)
				}
				node := in.Target.Node
				if node == "" {
					node = in.Node
				}
				byEvent[e.GetEventId()] = &activity{kind: a.GetActivityType().GetName(), node: node, command: in.Command, queue: a.GetTaskQueue().GetName()}
				order = append(order, e.GetEventId())
			case e.GetActivityTaskStartedEventAttributes() != nil:
				a := e.GetActivityTaskStartedEventAttributes()
				if s := byEvent[a.GetScheduledEventId()]; s != nil {
					s.identity = a.GetIdentity()
				}
			case e.GetChildWorkflowExecutionStartedEventAttributes() != nil:
				c := e.GetChildWorkflowExecutionStartedEventAttributes().GetWorkflowExecution()
				walk(c.GetWorkflowId(), c.GetRunId())
			case e.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
				walk(id, e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId())
			}
		}
		for _, ev := range order {
			out = append(out, *byEvent[ev])
		}
	}
	walk(id, "")
	return out
}
