package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/workflows"
)

// compile loads a runbook (a file, or a built-in by name) and its children
// against an inventory, with params, as `kedge run` does.
func compile(tb testing.TB, runbook, inv string, params map[string]any) workflows.RunbookInput {
	tb.Helper()
	cluster, err := inventory.LoadFile(inv)
	if err != nil {
		tb.Fatal(err)
	}
	lib := &runbooks.Library{Builtin: runbooks.Builtin}
	var l *runbooks.Loaded
	if strings.Contains(runbook, "/") {
		l, err = lib.LoadFile(runbook, cluster)
	} else {
		l, err = lib.Load(runbook, cluster)
	}
	if err != nil {
		tb.Fatal(err)
	}
	resolved, err := runbooks.ResolveParams(l.Runbook, params, cluster)
	if err != nil {
		tb.Fatal(err)
	}
	in := workflows.RunbookInput{Runbook: *l.Runbook, Params: resolved, Cluster: *cluster, Children: map[string]runbooks.Runbook{}}
	for name, child := range l.Children {
		in.Children[name] = *child
	}
	return in
}

// runTimed runs a runbook on the world's worker and returns its wall time
// and workflow ID.
func runTimed(tb testing.TB, in workflows.RunbookInput) (time.Duration, string) {
	tb.Helper()
	ctx := context.Background()
	start := time.Now()
	run, err := world.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "kedge"}, workflows.RunbookWorkflow, workflows.Admit(in, time.Now()))
	if err != nil {
		tb.Fatal(err)
	}
	if err := awaitRun(tb, run); err != nil {
		tb.Fatalf("%s: %v", run.GetID(), err)
	}
	return time.Since(start), run.GetID()
}

// A rolling kubelet swap over 50 simulated nodes with maxUnavailable 10,
// against the ideal: ⌈50/10⌉ batches of one node's swap time.

const (
	swapNodes  = 50
	swapWindow = 10
)

var swapLab struct {
	once      sync.Once
	lab       *testhosts.Lab
	inventory string
	workers   []string
	err       error
}

func fiftyNodes(b *testing.B) (string, []string) {
	cp, _ := kubeLab(b)
	swapLab.once.Do(func() {
		dir := filepath.Join(world.dir, "fifty")
		l, err := testhosts.Start(context.Background(), testhosts.Options{
			Count: swapNodes + 1, Names: lab.Names(swapNodes + 1), BaseIP: "127.0.23.", Dir: filepath.Join(dir, "hosts"),
		})
		if err != nil {
			swapLab.err = err
			return
		}
		swapLab.lab = l
		atWorldEnd(func() { _ = l.Close() })
		text := strings.Replace(lab.Inventory("fifty", l, l.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1)
		text = strings.ReplaceAll(text, "name: worker-", "name: fifty-worker-")
		swapLab.inventory = filepath.Join(dir, "inventory.yaml")
		if swapLab.err = os.WriteFile(swapLab.inventory, []byte(text), 0o644); swapLab.err != nil {
			return
		}
		// The world's worker owns its credentials: it must serve the
		// cluster before it runs any of its actions.
		workerServes(swapLab.inventory)
		for _, h := range l.Hosts[1:] {
			swapLab.workers = append(swapLab.workers, "fifty-"+h.Name)
			installKubelet(b, cp, h, "fifty-"+h.Name, "quay.io/poseidon/kubelet:v1.35.3")
		}
	})
	if swapLab.err != nil {
		b.Fatal(swapLab.err)
	}
	eventually(b, 2*time.Minute, "fifty workers Ready", func() bool {
		for _, w := range swapLab.workers {
			n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), w, metav1.GetOptions{})
			if err != nil || !nodeIsReady(n) || len(n.Spec.Taints) > 0 {
				return false
			}
		}
		return true
	})
	return swapLab.inventory, swapLab.workers
}

// thousand is the size of the rollout whose histories are measured.
const thousand = 1000

// thousandNodes writes an inventory of 1,000 workers (never reached: the
// node runbook only checks its param) and a rollout of a trivial node
// runbook over them, and returns the inventory and the rollout's input.
func thousandNodes(b *testing.B) (string, workflows.RunbookInput) {
	dir := b.TempDir()
	var inv strings.Builder
	fmt.Fprintf(&inv, "apiVersion: kedge/v1\nkind: Cluster\nmetadata:\n  name: thousand\nssh:\n  user: core\n  become: sudo\n  identityFile: %s\n  knownHostsFile: %s\ncontrollers:\n  - name: c-1\n    address: 10.99.0.1\nworkers:\n",
		world.lab.IdentityFile, world.lab.KnownHostsFile)
	for i := range thousand {
		fmt.Fprintf(&inv, "  - name: w-%d\n    address: 10.98.%d.%d\n", i+1, i/250, i%250+1)
	}
	files := map[string]string{
		"inventory.yaml": inv.String(),
		"trivial-node.yaml": `apiVersion: kedge/v1
kind: Runbook
metadata: {name: trivial-node}
params:
  node: {type: string, required: true}
steps:
  - id: check
    action: kedge.check
    with: {that: "${ params.node != '' }", message: no node}
`,
		"trivial-rollout.yaml": `apiVersion: kedge/v1
kind: Runbook
metadata: {name: trivial-rollout}
steps:
  - id: nodes
    runbook: trivial-node
    rollout:
      over: ${ cluster.workers.map(w, w.name) }
      maxUnavailable: 50
    with: {node: "${ item }"}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	inventory := filepath.Join(dir, "inventory.yaml")
	return inventory, compile(b, filepath.Join(dir, "trivial-rollout.yaml"), inventory, nil)
}

// historySize names one run and the size of its history.
type historySize struct {
	id, runID     string
	events, bytes int64
}

func (h historySize) where() string { return h.id + " (run " + h.runID + ")" }

// largestHistory finds, among the runs of a runbook, its rollout (every
// run of it: it continues as new) and its node runbooks, the one with the
// longest history. Node runbooks are looked up one by one: a visibility
// query over a thousand workflows is what timed out on a slow machine.
func largestHistory(b *testing.B, id string, nodes int) historySize {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var largest historySize
	consider := func(h historySize) {
		if h.events > largest.events {
			largest = h
		}
	}
	for _, wid := range []string{id, id + "/nodes"} {
		resp, err := world.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", wid)})
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Executions) == 0 {
			b.Fatalf("no run of %s", wid)
		}
		for _, e := range resp.Executions {
			consider(historySize{id: e.Execution.WorkflowId, runID: e.Execution.RunId, events: e.HistoryLength, bytes: e.HistorySizeBytes})
		}
	}
	for i := range nodes {
		wid := workflows.NodeWorkflowID("thousand", fmt.Sprintf("w-%d", i+1))
		d, err := world.client.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			b.Fatalf("%s: %v", wid, err)
		}
		info := d.GetWorkflowExecutionInfo()
		consider(historySize{id: wid, runID: info.GetExecution().GetRunId(), events: info.GetHistoryLength(), bytes: info.GetHistorySizeBytes()})
	}
	return largest
}
