package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"go.temporal.io/api/workflowservice/v1"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// startRunInv starts a runbook without waiting and returns its workflow ID.
func startRunInv(t *testing.T, file, inv string, args ...string) string {
	t.Helper()
	out, errOut, code := kedge(t, append([]string{"run", file, "--inventory", inv, "--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("kedge run: exit %d: %s", code, errOut)
	}
	var started struct {
		WorkflowID string `json:"workflowId"`
	}
	if err := json.Unmarshal([]byte(out), &started); err != nil || started.WorkflowID == "" {
		t.Fatalf("kedge run printed %q (%v)", out, err)
	}
	return started.WorkflowID
}

// progressOf queries a runbook or rollout workflow; ok is false while it
// cannot answer (not started yet, no worker polling).
func progressOf(t *testing.T, id string) (workflows.Progress, bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	v, err := world.client.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	var p workflows.Progress
	if err != nil || v.Get(&p) != nil {
		return p, false
	}
	return p, true
}

// rolloutOf is the workflow ID of the rollout a runbook's step runs.
func rolloutOf(t *testing.T, id, stepID string) string {
	t.Helper()
	var child string
	eventually(t, 60*time.Second, "step "+stepID+" to start its rollout", func() bool {
		p, ok := progressOf(t, id)
		if !ok {
			return false
		}
		for _, s := range p.Steps {
			if s.ID == stepID && s.Child != "" {
				child = s.Child
				return true
			}
		}
		return false
	})
	return child
}

// waitClosed waits for a workflow to close; on a timeout it prints its
// progress so a stuck rollout shows where it is.
func waitClosed(t *testing.T, id string, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	err := world.client.GetWorkflow(ctx, id, "").Get(ctx, nil)
	if ctx.Err() != nil {
		p, _ := progressOf(t, id)
		t.Fatalf("%s still running after %s: %+v", id, within, p)
	}
	return err
}

func kubeletVersions(t *testing.T, cp *controlplane.ControlPlane, nodes []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range nodes {
		node, err := cp.Client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[n] = node.Status.NodeInfo.KubeletVersion
		if node.Spec.Unschedulable {
			out[n] += " (cordoned)"
		}
	}
	return out
}

// kubeletStarts counts how often a host's kubelet started at version.
func kubeletStarts(t *testing.T, h *testhosts.Host, version string) int {
	data, err := h.ReadFile("/var/log/units/kubelet.service.log")
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "kubelet simulator "+version+" starting")
}

func TestRolloutPausedByABlockedDrainIsAbortedAndUndone(t *testing.T) {
	mainLane.join(t)
	cp, l, inv, workers := fiveWorkers(t)
	before := kubeletVersions(t, cp, workers)
	for n, v := range before {
		if strings.Contains(v, "cordoned") {
			t.Fatalf("%s starts %s", n, v)
		}
	}
	ctx := t.Context()
	blocked := workers[2]
	if _, err := cp.Client.AppsV1().Deployments("default").Create(ctx,
		deployment("pinned", 1, map[string]string{"kubernetes.io/hostname": blocked}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pinned-pdb", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pinned"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.PolicyV1().PodDisruptionBudgets("default").Delete(context.Background(), "pinned-pdb", metav1.DeleteOptions{})
		_ = cp.Client.AppsV1().Deployments("default").Delete(context.Background(), "pinned", metav1.DeleteOptions{})
	})
	eventually(t, 60*time.Second, "the pinned pod to run behind a budget that allows no disruption", func() bool {
		pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "pinned-pdb", metav1.GetOptions{})
		return err == nil && runningPods(t, cp, "pinned")[blocked] == 1 && pdb.Status.DisruptionsAllowed == 0
	})

	id := startRunInv(t, "kubelet-image-swap", inv, "--set", "image=quay.io/poseidon/kubelet:v1.35.6",
		"--set", "nodes=workers", "--set", "maxUnavailable=1", "--set", "failureBudget=0",
		"--set", "drainTimeout=10s", "--set", "approveControllers=false")
	ro := rolloutOf(t, id, "workers")
	var paused workflows.Progress
	eventually(t, 3*time.Minute, "the rollout to pause at its failure budget", func() bool {
		p, ok := progressOf(t, ro)
		paused = p
		return ok && p.State == workflows.StateWaiting
	})
	states := map[string]string{}
	for _, s := range paused.Steps {
		states[s.ID] = s.State
	}
	want := map[string]string{workers[0]: "succeeded", workers[1]: "succeeded", blocked: "failed", workers[3]: "pending", workers[4]: "pending"}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("paused with %v, want %v", states, want)
	}
	if s := step(t, paused, blocked); !strings.Contains(s.LastError, "DrainBlocked") && !strings.Contains(s.LastError, "pinned-pdb") {
		t.Errorf("the blocked node's error does not name the budget: %q", s.LastError)
	}
	if v := kubeletVersions(t, cp, workers[:2]); v[workers[0]] != "v1.35.6" || v[workers[1]] != "v1.35.6" {
		t.Errorf("before the abort the first two nodes run %v", v)
	}

	out, errOut, code := kedge(t, "approve", id, "--decision", "abort", "--by", "sre-on-call", "--output", "json")
	if code != 0 {
		t.Fatalf("kedge approve --decision abort: exit %d: %s %s", code, out, errOut)
	}
	err := waitClosed(t, id, 3*time.Minute)
	if err == nil || !strings.Contains(err.Error(), "aborted by sre-on-call") {
		t.Fatalf("the run ended with %v, want an abort by sre-on-call", err)
	}
	recordHistory(t, id, "rollout-abort-runbook")
	recordHistory(t, ro, "rollout-abort")
	// `kedge watch` shows the rollout node by node, in JSON and in text:
	// the completed nodes undone.
	want[workers[0]], want[workers[1]] = workflows.StateUndone, workflows.StateUndone
	p, _ := watch(t, id)
	items := map[string]string{}
	for _, it := range step(t, p, "workers").Items {
		items[it.ID] = it.State
	}
	if fmt.Sprint(items) != fmt.Sprint(want) {
		t.Errorf("kedge watch --output json shows the rollout's items as %v, want %v", items, want)
	}
	text, _, _ := kedge(t, "watch", id)
	for _, line := range []string{"[5 items: 2 undone, 1 failed, 2 pending]", "workers/" + blocked + " failed", "undone: " + workers[0]} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), line) {
			t.Errorf("kedge watch lacks %q:\n%s", line, text)
		}
	}
	// The completed nodes are back on their previous kubelet; nothing is
	// left cordoned; the nodes after the failure were never touched.
	eventually(t, 60*time.Second, "every worker back on its previous kubelet and schedulable", func() bool {
		return fmt.Sprint(kubeletVersions(t, cp, workers)) == fmt.Sprint(before)
	})
	for i, w := range workers {
		dropin, _ := l.Hosts[i+1].ReadFile("/etc/systemd/system/kubelet.service.d/10-image.conf")
		if strings.Contains(string(dropin), "v1.35.6") {
			t.Errorf("%s keeps the aborted drop-in: %q", w, dropin)
		}
		if i >= 3 && kubeletStarts(t, l.Hosts[i+1], "v1.35.6") != 0 {
			t.Errorf("%s, after the failure, was swapped", w)
		}
	}
	if runningPods(t, cp, "pinned")[blocked] != 1 {
		t.Error("the pod behind the budget was evicted")
	}
}

func TestRolloutSurvivesItsWorkerKilled(t *testing.T) {
	mainLane.join(t)
	const queue = "rollout-kill"
	cp, l, inv, workers := fiveWorkers(t)
	for n, v := range kubeletVersions(t, cp, workers) {
		if strings.Contains(v, "cordoned") {
			t.Fatalf("%s starts %s", n, v)
		}
	}
	since := time.Now().UTC()
	first := startWorker(t, queue, inv)
	id := startRunInv(t, "kubelet-image-swap", inv, "--task-queue", queue,
		"--set", "image=quay.io/poseidon/kubelet:v1.35.5", "--set", "nodes=workers",
		"--set", "maxUnavailable=2", "--set", "approveControllers=false")
	// Kill the worker once the first node runs the new kubelet: by then the
	// window holds a second node somewhere in its swap.
	eventually(t, 3*time.Minute, "a first node on the new kubelet", func() bool {
		for _, h := range l.Hosts[1:] {
			if kubeletStarts(t, h, "v1.35.5") > 0 {
				return true
			}
		}
		return false
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	swapped := 0
	for _, h := range l.Hosts[1:] {
		if kubeletStarts(t, h, "v1.35.5") > 0 {
			swapped++
		}
	}
	if swapped == len(workers) {
		t.Fatal("every node was swapped before the worker was killed: nothing to resume")
	}
	t.Logf("worker killed with %d of %d nodes on the new kubelet", swapped, len(workers))
	startWorker(t, queue, inv)

	if err := waitClosed(t, id, 5*time.Minute); err != nil {
		t.Fatalf("the rollout failed after its worker was replaced: %v", err)
	}
	for i, w := range workers {
		if v := kubeletVersions(t, cp, workers)[w]; v != "v1.35.5" {
			log, _ := l.Hosts[i+1].ReadFile("/var/log/units/kubelet.service.log")
			p, _ := progressOf(t, workflows.NodeWorkflowID("five", w))
			t.Errorf("%s: %s, want v1.35.5 and schedulable\nkubelet log: %s\nnode runbook: %+v", w, v, log, p)
		}
	}
	for i, w := range workers {
		h := l.Hosts[i+1]
		dropin, _ := h.ReadFile("/etc/systemd/system/kubelet.service.d/10-image.conf")
		if !strings.Contains(string(dropin), "v1.35.5") {
			t.Errorf("%s drop-in: %q", w, dropin)
		}
		// One node runbook per node, and the kubelet restarted on the new
		// image only by its restart step: at least once, and at most once
		// per attempt (a kill can cut an attempt short before or after its
		// systemctl restart reached the host).
		runs := nodeRuns(t, workflows.NodeWorkflowID("five", w), since)
		if len(runs) != 1 {
			t.Errorf("%s was swapped by %d node runbooks", w, len(runs))
			continue
		}
		p, ok := progressOf(t, workflows.NodeWorkflowID("five", w))
		if !ok {
			t.Fatalf("no progress from %s's runbook", w)
		}
		if got, attempts := kubeletStarts(t, h, "v1.35.5"), step(t, p, "restart").Attempts; got < 1 || got > attempts {
			t.Errorf("%s: kubelet started %d times on the new image, restart step ran %d times", w, got, attempts)
		}
	}
}

// nodeRuns lists the runs of a node's workflow ID started since t0.
func nodeRuns(t *testing.T, id string, since time.Time) []string {
	t.Helper()
	resp, err := world.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s' AND StartTime > '%s'", id, since.Format(time.RFC3339Nano)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, e := range resp.Executions {
		runs = append(runs, e.Execution.RunId)
	}
	return runs
}
