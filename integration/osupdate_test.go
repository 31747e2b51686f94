package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kedge.dev/kedge/actions/prometheus"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/promlab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// osUpdateKernel is the kernel the os-update tests offer every host.
const osUpdateKernel = "6.1.0-21-amd64"

// osup is a Debian cluster of one controller and four workers, each
// host's kubelet a Node of the world's control plane (osup-NAME, labelled
// osup=yes), every host able to stage an update with apt-get and to
// reboot for real (testhosts).
var osup struct {
	once      sync.Once
	lab       *testhosts.Lab
	inventory string
	nodes     []string // Node names, controller first
	err       error
}

func osUpdateLab(t *testing.T) (*controlplane.ControlPlane, *testhosts.Lab, string, []string) {
	t.Helper()
	cp, _ := kubeLab(t)
	osup.once.Do(func() {
		dir := filepath.Join(world.dir, "osup")
		l, err := testhosts.Start(context.Background(), testhosts.Options{Count: 5, Names: lab.Names(5), BaseIP: "127.0.62.",
			Dir: filepath.Join(dir, "hosts"), OS: testhosts.Debian})
		if err != nil {
			osup.err = err
			return
		}
		osup.lab = l
		atWorldEnd(func() { _ = l.Close() })
		text := strings.Replace(lab.Inventory("osup", l, l.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1)
		text = strings.ReplaceAll(text, "name: worker-", "name: osup-worker-")
		text = strings.ReplaceAll(text, "name: controller-", "name: osup-controller-")
		osup.inventory = filepath.Join(dir, "inventory.yaml")
		if osup.err = os.WriteFile(osup.inventory, []byte(text), 0o644); osup.err != nil {
			return
		}
		for _, h := range l.Hosts {
			osup.nodes = append(osup.nodes, "osup-"+h.Name)
			installKubelet(t, cp, h, "osup-"+h.Name, "quay.io/poseidon/kubelet:v1.35.3")
		}
	})
	if osup.err != nil {
		t.Fatal(osup.err)
	}
	eventually(t, 60*time.Second, "the osup nodes Ready", func() bool {
		for _, n := range osup.nodes {
			node, err := cp.Client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
			if err != nil || !nodeIsReady(node) {
				return false
			}
		}
		return true
	})
	for _, n := range osup.nodes {
		patch := []byte(`{"metadata":{"labels":{"osup":"yes"}},"spec":{"unschedulable":false}}`)
		if _, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), n, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	workerServes(osup.inventory)
	return cp, osup.lab, osup.inventory, osup.nodes
}

// offerKernel has every host's update server offer osUpdateKernel.
func offerKernel(t *testing.T, l *testhosts.Lab) {
	t.Helper()
	for _, h := range l.Hosts {
		if err := h.OfferUpdate(testhosts.Update{Packages: []testhosts.Package{
			{Name: "curl", Version: "7.88.1-10+deb12u6"},
			{Name: "linux-image-amd64", Version: "6.1.90-1", Depends: []string{"linux-image-" + osUpdateKernel}},
			{Name: "linux-image-" + osUpdateKernel, Version: "6.1.90-1"},
		}}); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterWatch samples, until stopped, how many of nodes are cordoned and
// how many pods of app are available (running, not being deleted), and
// keeps the worst of each.
type clusterWatch struct {
	mu           sync.Mutex
	maxCordoned  int
	minAvailable int
	samples      int
	stop         func()
}

func watchCluster(t *testing.T, cp *controlplane.ControlPlane, nodes []string, app string) *clusterWatch {
	w := &clusterWatch{minAvailable: 1 << 30}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	in := map[string]bool{}
	for _, n := range nodes {
		in[n] = true
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "osup=yes"})
			pods, perr := cp.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err == nil && perr == nil {
				cordoned, available := 0, 0
				for _, n := range list.Items {
					if in[n.Name] && n.Spec.Unschedulable {
						cordoned++
					}
				}
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
						available++
					}
				}
				w.mu.Lock()
				w.maxCordoned, w.minAvailable, w.samples = max(w.maxCordoned, cordoned), min(w.minAvailable, available), w.samples+1
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	return w
}

// A cluster of one controller and four workers updated with
// maxUnavailable 2 inside a maintenance window of 10 s every minute: every
// node reboots once into the staged kernel, never more than two are
// cordoned at once, the Deployment keeps the minimum its
// PodDisruptionBudget sets; no node starts outside the window, so the
// wave stops between nodes and goes on with the rest in the next
// opening; the worker killed while the run waits for it changes nothing.
func TestOSUpdateInWindowedWaves(t *testing.T) {
	mainLane.join(t)
	cp, l, inv, nodes := osUpdateLab(t)
	offerKernel(t, l)
	ctx := t.Context()
	if _, err := cp.Client.AppsV1().Deployments("default").Create(ctx, deployment("osup-app", 3, map[string]string{"osup": "yes"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	two := intstr.FromInt32(2)
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "osup-app", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "osup-app"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = cp.Client.AppsV1().Deployments("default").Delete(bg, "osup-app", metav1.DeleteOptions{})
		_ = cp.Client.PolicyV1().PodDisruptionBudgets("default").Delete(bg, "osup-app", metav1.DeleteOptions{})
	})
	eventually(t, 60*time.Second, "osup-app's 3 pods running", func() bool {
		n := 0
		for _, c := range runningPods(t, cp, "osup-app") {
			n += c
		}
		return n == 3
	})
	boots := map[string]int{}
	for _, h := range l.Hosts {
		boots[h.Name] = h.Boots()
	}
	const queue = "osupdate"
	first := startWorker(t, queue, inv)
	w := watchCluster(t, cp, nodes, "osup-app")
	out, errOut, code := kedge(t, "run", "os-update", "--inventory", inv, "--task-queue", queue, "--output", "json",
		"--set", "maxUnavailable=2", "--set", "approveFirst=false", "--set", "approveControllers=false",
		"--set", "windowSchedule=* * * * *", "--set", "windowDuration=10s")
	if code != 0 {
		t.Fatalf("kedge run os-update: exit %d: %s %s", code, out, errOut)
	}
	id := runID(t, out)
	chat := followInChat(t, id, "os-update", "osup")

	// Between nodes, waiting for the next opening: the worker dies.
	var waiting string
	eventually(t, 3*time.Minute, "the run to wait for the next window between nodes", func() bool {
		for _, s := range []string{"first", "workers", "controllers"} {
			p, ok := progressOf(t, workflows.ChildWorkflowID(id, s))
			if ok && p.Waiting != "" && len(runningItems(p)) == 0 && len(pendingItems(p)) > 0 {
				waiting = p.Waiting
				return true
			}
		}
		return false
	})
	if !strings.HasPrefix(waiting, "waiting for the next window: ") {
		t.Errorf("progress says %q", waiting)
	}
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	startWorker(t, queue, inv)
	if err := waitClosed(t, id, 6*time.Minute); err != nil {
		p, _ := progressOf(t, id)
		t.Fatalf("os-update failed: %v\n%+v", err, p)
	}
	w.stop()
	// Chat was told of the waves, the first one (which starts with the
	// run) in every post; once done, with the kernel it rebooted into.
	waves := chat.waves(t)
	if len(waves) == 0 {
		t.Error("no wave posted to chat")
	}
	for _, p := range waves {
		if !strings.Contains(p.Text, "`first`: osup-worker-1 ") ||
			strings.Contains(p.Text, "osup-worker-1 done") && !strings.Contains(p.Text, "osup-worker-1 done (rebooted into "+osUpdateKernel+")") {
			t.Errorf("a wave post without the first wave, or its reboot: %s", p.Text)
		}
	}

	var took []string
	for i, h := range l.Hosts {
		if got := h.Boots() - boots[h.Name]; got != 1 {
			t.Errorf("%s rebooted %d times, want 1", h.Name, got)
		}
		if k, err := h.ReadFile("/proc/sys/kernel/osrelease"); err != nil || strings.TrimSpace(string(k)) != osUpdateKernel {
			t.Errorf("%s runs kernel %q (%v), want %s", h.Name, k, err, osUpdateKernel)
		}
		// Each node's runbook started inside an opening ([hh:mm:00, hh:mm:10) UTC).
		d, err := world.client.DescribeWorkflowExecution(ctx, workflows.NodeWorkflowID("osup", nodes[i]), "")
		if err != nil {
			t.Fatal(err)
		}
		info := d.GetWorkflowExecutionInfo()
		if s := info.GetStartTime().AsTime().UTC(); s.Second() >= 10 {
			t.Errorf("%s's update started at %s, outside the window", nodes[i], s.Format(time.RFC3339Nano))
		}
		took = append(took, fmt.Sprintf("%s %.1fs", nodes[i], info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime()).Seconds()))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.maxCordoned > 2 || w.maxCordoned == 0 {
		t.Errorf("at most %d nodes cordoned at once (%d samples), want 1 or 2", w.maxCordoned, w.samples)
	}
	if w.minAvailable < 2 {
		t.Errorf("osup-app fell to %d available pods, below its PodDisruptionBudget's 2", w.minAvailable)
	}
	t.Logf("os-update of 5 nodes: at most %d cordoned, at least %d pods available over %d samples; waited: %s; each node's runbook (stage, cordon, drain, reboot, Ready, uncordon): %s",
		w.maxCordoned, w.minAvailable, w.samples, waiting, strings.Join(took, ", "))
}

// A drain a PodDisruptionBudget blocks: the node is not rebooted and is
// uncordoned, the wave pauses for a person, and the node after it is not
// touched. Aborted, the run ends.
func TestOSUpdatePausesOnABlockedDrain(t *testing.T) {
	mainLane.join(t)
	cp, l, inv, nodes := osUpdateLab(t)
	ctx := t.Context()
	blocked, next := nodes[1], nodes[2]
	if _, err := cp.Client.AppsV1().Deployments("default").Create(ctx,
		deployment("osup-pinned", 1, map[string]string{"kubernetes.io/hostname": blocked}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "osup-pinned", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "osup-pinned"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = cp.Client.AppsV1().Deployments("default").Delete(bg, "osup-pinned", metav1.DeleteOptions{})
		_ = cp.Client.PolicyV1().PodDisruptionBudgets("default").Delete(bg, "osup-pinned", metav1.DeleteOptions{})
	})
	eventually(t, 60*time.Second, "osup-pinned running on "+blocked, func() bool {
		pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "osup-pinned", metav1.GetOptions{})
		return err == nil && runningPods(t, cp, "osup-pinned")[blocked] == 1 && pdb.Status.DisruptionsAllowed == 0
	})
	// The hosts' next update: a newer kernel, so that each needs a reboot.
	const kernel = "6.1.0-22-amd64"
	for _, h := range l.Hosts {
		if err := h.OfferUpdate(testhosts.Update{Packages: []testhosts.Package{
			{Name: "linux-image-amd64", Version: "6.1.94-1", Depends: []string{"linux-image-" + kernel}},
			{Name: "linux-image-" + kernel, Version: "6.1.94-1"},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	bootsBlocked, bootsNext := l.Hosts[1].Boots(), l.Hosts[2].Boots()
	out, errOut, code := kedge(t, "run", "os-update", "--inventory", inv, "--output", "json",
		"--set", "nodes="+blocked+","+next, "--set", "drainTimeout=3s", "--set", "ignoreWindow=true")
	if code != 0 {
		t.Fatalf("kedge run os-update: exit %d: %s %s", code, out, errOut)
	}
	id := runID(t, out)
	rollout := workflows.ChildWorkflowID(id, "first")
	var paused workflows.Progress
	eventually(t, 2*time.Minute, "the first wave to pause", func() bool {
		p, ok := progressOf(t, rollout)
		paused = p
		return ok && p.State == workflows.StateWaiting
	})
	if s := step(t, paused, blocked); s.State != workflows.StateFailed || !strings.Contains(s.LastError, "osup-pinned") {
		t.Errorf("%s: %+v", blocked, s)
	}
	if l.Hosts[1].Boots() != bootsBlocked || l.Hosts[2].Boots() != bootsNext {
		t.Errorf("boots: %s %d (was %d), %s %d (was %d): nothing may reboot", blocked, l.Hosts[1].Boots(), bootsBlocked, next, l.Hosts[2].Boots(), bootsNext)
	}
	for _, n := range []string{blocked, next} {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil || node.Spec.Unschedulable {
			t.Errorf("%s cordoned (%v) while the wave waits", n, err)
		}
	}
	if _, errOut, code := kedge(t, "approve", rollout, "--decision", "abort"); code != 0 {
		t.Fatalf("abort: exit %d: %s", code, errOut)
	}
	if err := waitClosed(t, id, time.Minute); err == nil {
		t.Error("an aborted os-update succeeded")
	}
	if l.Hosts[2].Boots() != bootsNext {
		t.Errorf("%s rebooted after the abort", next)
	}
}

// runID is the workflow ID `kedge run --output json` printed; the run is
// cancelled at the test's end if it is still open.
func runID(t *testing.T, out string) string {
	t.Helper()
	var started struct {
		WorkflowID string `json:"workflowId"`
	}
	if err := json.Unmarshal([]byte(out), &started); err != nil || started.WorkflowID == "" {
		t.Fatalf("no workflow ID in %q (%v)", out, err)
	}
	t.Cleanup(func() {
		_ = world.client.TerminateWorkflow(context.Background(), started.WorkflowID, "", "test over")
	})
	return started.WorkflowID
}

func runningItems(p workflows.Progress) []string { return itemsIn(p, workflows.StateRunning) }
func pendingItems(p workflows.Progress) []string { return itemsIn(p, workflows.StatePending) }

func itemsIn(p workflows.Progress, state string) []string {
	var out []string
	for _, s := range p.Steps {
		if s.State == state {
			out = append(out, s.ID)
		}
	}
	return out
}

// osupAlertRules alert on the gauge the test flips, at once (for: 0s),
// beside an alert that always fires and is named in no gate (a deadman
// switch, as kube-prometheus ships one).
const osupAlertRules = `groups:
  - name: osup
    rules:
      - alert: OsupNodeDown
        expr: osup_node_down > 0
        for: 0s
      - alert: OsupWatchdog
        expr: vector(1)
`

// The wave's alert gate against a real Prometheus scraping a gauge the
// test flips: while OsupNodeDown fires no node starts (none cordoned,
// none rebooted) and progress says why; held past alertsPauseAfter the
// wave pauses for a person; the alert cleared and the pause continued,
// the wave goes on and both nodes reboot once. An alert outside the set
// (OsupWatchdog) holds nothing. A URL with user information, a path or
// another scheme is refused before anything starts.
func TestOSUpdateHeldWhileAlertsFire(t *testing.T) {
	mainLane.join(t)
	cp, l, inv, nodes := osUpdateLab(t)
	ctx := t.Context()
	gauge := promlab.ServeGauges(t)
	gauge.Set("osup_node_down", 1)
	prom := promlab.StartT(t, promlab.Options{Rules: osupAlertRules, Targets: []string{gauge.Target}})
	if err := prom.WaitFiring(ctx, 30*time.Second, "OsupNodeDown", "OsupWatchdog"); err != nil {
		t.Fatal(err)
	}

	// Refused before anything starts: the URL names no Prometheus base.
	for _, bad := range []string{"http://kedge:s3cret@" + strings.TrimPrefix(prom.URL, "http://"), prom.URL + "/api/v1/admin/tsdb/delete_series", "file:///etc/kedge/codec.key"} {
		out, errOut, code := kedge(t, "run", "os-update", "--inventory", inv, "--output", "json", "--set", "nodes="+nodes[1],
			"--set", "ignoreWindow=true", "--set", "alertsUrl="+bad, "--set", "alerts=OsupNodeDown")
		if code == 0 || strings.Contains(out, "workflowId") || !strings.Contains(errOut, "alerts") || strings.Contains(errOut, "s3cret") {
			t.Errorf("alertsUrl=%s: exit %d, stdout %q, stderr %q: want a refusal naming the alert gate, no password", bad, code, out, errOut)
		}
	}

	// The hosts' next update: a newer kernel, so that each needs a reboot.
	const kernel = "6.1.0-23-amd64"
	for _, h := range l.Hosts {
		if err := h.OfferUpdate(testhosts.Update{Packages: []testhosts.Package{
			{Name: "linux-image-amd64", Version: "6.1.99-1", Depends: []string{"linux-image-" + kernel}},
			{Name: "linux-image-" + kernel, Version: "6.1.99-1"},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	picked := []int{1, 2}
	boots := map[int]int{}
	for _, i := range picked {
		boots[i] = l.Hosts[i].Boots()
	}
	started := time.Now()
	out, errOut, code := kedge(t, "run", "os-update", "--inventory", inv, "--output", "json",
		"--set", "nodes="+nodes[1]+","+nodes[2], "--set", "ignoreWindow=true", "--set", "approveFirst=false",
		"--set", "alertsUrl="+prom.URL, "--set", "alerts=OsupNodeDown,OsupEtcdDown",
		"--set", "alertsRecheck=1s", "--set", "alertsPauseAfter=15s")
	if code != 0 {
		t.Fatalf("kedge run os-update: exit %d: %s %s", code, out, errOut)
	}
	id := runID(t, out)
	rollout := workflows.ChildWorkflowID(id, "first")
	var held workflows.Progress
	eventually(t, time.Minute, "the first wave held by the alert", func() bool {
		p, ok := progressOf(t, rollout)
		held = p
		return ok && strings.Contains(p.Waiting, "alerts firing: OsupNodeDown")
	})
	// Held, it asks again every second: a few questions, and still nothing
	// started.
	eventually(t, 30*time.Second, "three questions to Prometheus", func() bool {
		n := 0
		for _, a := range scheduledActivities(t, world.client, rollout, "") {
			if a == prometheus.AlertsAction {
				n++
			}
		}
		return n >= 3
	})
	var paused workflows.Progress
	eventually(t, time.Minute, "the wave to pause after 15 s of alerts", func() bool {
		p, ok := progressOf(t, rollout)
		paused = p
		return ok && p.State == workflows.StateWaiting && p.Nonce != ""
	})
	heldFor := time.Since(started)
	if !strings.HasPrefix(held.Waiting, "held: alerts firing: OsupNodeDown (since ") || len(runningItems(held)) != 0 {
		t.Errorf("held: waiting %q, running %v", held.Waiting, runningItems(held))
	}
	if !strings.HasPrefix(paused.Error, "paused: alerts firing: OsupNodeDown, holding for ") || len(runningItems(paused)) != 0 || len(pendingItems(paused)) != 1 {
		t.Errorf("paused: error %q, running %v, pending %v", paused.Error, runningItems(paused), pendingItems(paused))
	}
	for _, i := range picked {
		if got := l.Hosts[i].Boots(); got != boots[i] {
			t.Errorf("%s rebooted while its alert fired", nodes[i])
		}
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, nodes[i], metav1.GetOptions{})
		if err != nil || node.Spec.Unschedulable {
			t.Errorf("%s cordoned (%v) while its alert fired", nodes[i], err)
		}
	}

	// Cleared, and the pause continued: the wave goes on.
	gauge.Set("osup_node_down", 0)
	if err := prom.WaitFiring(ctx, 30*time.Second, "OsupWatchdog"); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := kedge(t, "approve", rollout, "--decision", "continue"); code != 0 {
		t.Fatalf("continue: exit %d: %s", code, errOut)
	}
	cleared := time.Now()
	if err := waitClosed(t, id, 3*time.Minute); err != nil {
		p, _ := progressOf(t, rollout)
		t.Fatalf("os-update failed: %v\n%+v", err, p)
	}
	for _, i := range picked {
		if got := l.Hosts[i].Boots() - boots[i]; got != 1 {
			t.Errorf("%s rebooted %d times, want 1", nodes[i], got)
		}
		if k, err := l.Hosts[i].ReadFile("/proc/sys/kernel/osrelease"); err != nil || strings.TrimSpace(string(k)) != kernel {
			t.Errorf("%s runs kernel %q (%v), want %s", nodes[i], k, err, kernel)
		}
	}
	t.Logf("held %s by the alert, then paused (%q); after continue, 2 nodes updated in %s", heldFor.Round(100*time.Millisecond), paused.Error, time.Since(cleared).Round(100*time.Millisecond))
}
