package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

var kubeWorld struct {
	once      sync.Once
	cp        *controlplane.ControlPlane
	inventory string
	err       error
}

// kubeLab starts (once) a real control plane and returns an inventory of
// the SSH lab that names it.
func kubeLab(t testing.TB) (*controlplane.ControlPlane, string) {
	t.Helper()
	kubeWorld.once.Do(func() {
		dir := filepath.Join(world.dir, "kube")
		kubeWorld.cp, kubeWorld.err = controlplane.Start(context.Background(), controlplane.Options{Dir: dir})
		if kubeWorld.err != nil {
			return
		}
		atWorldEnd(func() { _ = kubeWorld.cp.Stop() })
		inv := labInventory(world.lab, world.lab.KnownHostsFile)
		inv = strings.Replace(inv, "controllers:\n", "kubernetes:\n  kubeconfig: "+kubeWorld.cp.AdminKubeconfig+"\ncontrollers:\n", 1)
		kubeWorld.inventory = filepath.Join(dir, "inventory.yaml")
		kubeWorld.err = os.WriteFile(kubeWorld.inventory, []byte(inv), 0o644)
	})
	if kubeWorld.err != nil {
		t.Fatal(kubeWorld.err)
	}
	return kubeWorld.cp, kubeWorld.inventory
}

func readyNode(t *testing.T, cp *controlplane.ControlPlane, name, version string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller-manager updates new nodes too: retry on conflicts.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		n.Status.NodeInfo.KubeletVersion = version
		_, err = cp.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestKubeActionsAgainstARealAPIServer(t *testing.T) {
	mainLane.join(t)
	cp, inv := kubeLab(t)
	readyNode(t, cp, "worker-1", "v1.35.4")
	readyNode(t, cp, "worker-2", "v1.35.4")
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: kube-actions}
steps:
  - id: cordon
    action: kube.cordon
    on: worker-1
  - id: ready
    action: kube.wait-node
    on: worker-1, worker-2
    with: {kubeletVersion: v1.35.4, timeout: 30s}
  - id: initial
    action: kube.label-taint
    on: ${ cluster.workers.map(w, w.name) }
    with:
      labels: ${ host.labels + ['kedge.dev/lab=true'] }
      taints: ["dedicated=lab:NoSchedule"]
  - id: remove
    needs: [initial, ready, cordon]
    action: kube.delete-node
    on: worker-2
`)
	p, code, errOut := runWaitInv(t, rb, inv)
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("exit %d: %s %+v", code, errOut, p)
	}
	ctx := context.Background()
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Labels["kedge.dev/lab"] != "true" || len(n.Spec.Taints) == 0 {
		t.Errorf("worker-1: unschedulable=%v labels=%v taints=%v", n.Spec.Unschedulable, n.Labels, n.Spec.Taints)
	}
	if _, err := cp.Client.CoreV1().Nodes().Get(ctx, "worker-2", metav1.GetOptions{}); err == nil {
		t.Error("worker-2 was not deleted")
	}
	// Running it again changes nothing and still succeeds: the actions are
	// idempotent (delete of a deleted node included).
	readyNode(t, cp, "worker-2", "v1.35.4")
	if _, code, errOut := runWaitInv(t, rb, inv); code != 0 {
		t.Fatalf("second run: %s", errOut)
	}
}

func TestKubeWaitNodeTimesOutWithAClearError(t *testing.T) {
	mainLane.join(t)
	_, inv := kubeLab(t)
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: wait-missing}
steps:
  - id: wait
    action: kube.wait-node
    on: controller-1
    retry: {maxAttempts: 1}
    with: {timeout: 2s}
`)
	_, code, errOut := runWaitInv(t, rb, inv)
	if code == 0 || !strings.Contains(errOut, "node controller-1 not Ready after 2s, waiting since ") || !strings.Contains(errOut, "(not registered)") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// startKubelet installs the kubelet unit (Typhoon style: the kubelet runs as
// a container whose image comes from KUBELET_IMAGE) on a lab host and starts
// it; the container stand-in runs the kubelet simulator for that image.
func startKubelet(t *testing.T, cp *controlplane.ControlPlane, name, image string) {
	t.Helper()
	installKubelet(t, cp, labHost(t, name), name, image)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := labHost(t, name).ReadFile("/var/log/units/kubelet.service.log")
			t.Logf("%s kubelet.service log:\n%s", name, b)
		}
	})
	eventually(t, 30*time.Second, name+" to register Ready", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && n.Status.NodeInfo.KubeletVersion != "" && nodeIsReady(n)
	})
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestKubeletImageSwapOnOneNode(t *testing.T) {
	mainLane.join(t)
	cp, inv := kubeLab(t)
	startKubelet(t, cp, "controller-1", "quay.io/poseidon/kubelet:v1.35.3")
	p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", inv,
		"--set", "node=controller-1", "--set", "image=quay.io/poseidon/kubelet:v1.35.4", "--set", "readyTimeout=60s")
	if code != 0 {
		t.Fatalf("swap failed: exit %d: %s\n%+v", code, errOut, p)
	}
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), "controller-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.NodeInfo.KubeletVersion != "v1.35.4" || n.Spec.Unschedulable {
		t.Errorf("after the swap: kubelet %s, unschedulable %v", n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
	}
	dropin := readHostFile(t, "controller-1", "/etc/systemd/system/kubelet.service.d/10-image.conf")
	if !strings.Contains(dropin, `Environment="KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.35.4"`) {
		t.Errorf("drop-in = %q", dropin)
	}

	// Typhoon's tags: an arch suffix, a build SHA. The version waited for
	// is the one the image's kubelet reports, and the image is on the
	// node before the cordon.
	for _, c := range []struct{ image, version string }{
		{"quay.io/poseidon/kubelet:v1.35.5-amd64", "v1.35.5"},
		{"quay.io/poseidon/kubelet:" + testhosts.KubeletBuildTag("v1.35.6"), "v1.35.6"},
	} {
		p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", inv,
			"--set", "node=controller-1", "--set", "image="+c.image, "--set", "readyTimeout=60s")
		if code != 0 {
			t.Fatalf("swap to %s failed: exit %d: %s\n%+v", c.image, code, errOut, p)
		}
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), "controller-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.NodeInfo.KubeletVersion != c.version || n.Spec.Unschedulable {
			t.Errorf("after the swap to %s: kubelet %s, unschedulable %v", c.image, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
		}
		pulled := pulledAt(t, labHost(t, "controller-1"), c.image)
		cordon := step(t, p, "cordon")
		if pulled.IsZero() || cordon.StartedAt == nil || !pulled.Before(*cordon.StartedAt) {
			t.Errorf("%s pulled at %v, the cordon started at %v: want a pull before the cordon", c.image, pulled, cordon.StartedAt)
		}
	}

	// A kubelet newer than the API server (the lab's v1.35.4), or four
	// minors behind it: refused before the cordon, by the version the
	// pulled image's kubelet reports; the node keeps its kubelet.
	dropin = readHostFile(t, "controller-1", "/etc/systemd/system/kubelet.service.d/10-image.conf")
	for _, c := range []struct{ image, want string }{
		{"quay.io/poseidon/kubelet:v1.36.3", "the kubelet v1.36.3 for controller-1 is newer than kube-apiserver v1.35.4 on (the cluster's API) (/version)"},
		{"quay.io/poseidon/kubelet:v1.31.14", "the kubelet v1.31.14 for controller-1 is 4 minors behind kube-apiserver v1.35.4"},
	} {
		p, code, _ := runWaitInv(t, "kubelet-image-swap-node", inv,
			"--set", "node=controller-1", "--set", "image="+c.image, "--set", "readyTimeout=60s")
		if code == 0 || !strings.Contains(p.Error, c.want) || !strings.Contains(p.Error, "UpgradeRefused") {
			t.Fatalf("a swap to %s: exit %d, %s: %s", c.image, code, p.State, p.Error)
		}
		if s := step(t, p, "cordon"); s.State != "not-run" {
			t.Errorf("the swap to %s was refused after the cordon: %s", c.image, s.State)
		}
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), "controller-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.NodeInfo.KubeletVersion != "v1.35.6" || n.Spec.Unschedulable {
			t.Errorf("after the refused swap to %s: kubelet %s, unschedulable %v", c.image, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
		}
		if got := readHostFile(t, "controller-1", "/etc/systemd/system/kubelet.service.d/10-image.conf"); got != dropin {
			t.Errorf("the refused swap to %s changed the drop-in: %q", c.image, got)
		}
	}
}

// pulledAt is when the host's container runtime last pulled image, from
// its pull log (zero when it never did).
func pulledAt(t *testing.T, h *testhosts.Host, image string) time.Time {
	t.Helper()
	b, err := h.ReadFile(testhosts.PullLog)
	if err != nil {
		return time.Time{}
	}
	var last time.Time
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == image {
			if at, err := time.Parse(time.RFC3339Nano, f[0]); err == nil {
				last = at
			}
		}
	}
	return last
}

// freshNodes removes Node objects earlier tests left and starts the kubelet
// simulator on the named lab hosts.
func freshNodes(t *testing.T, cp *controlplane.ControlPlane, names ...string) {
	t.Helper()
	for _, n := range names {
		_, _ = labHost(t, n).Exec(t.Context(), "systemctl", "stop", "kubelet")
		_ = cp.Client.CoreV1().Nodes().Delete(t.Context(), n, metav1.DeleteOptions{})
	}
	for _, n := range names {
		startKubelet(t, cp, n, "quay.io/poseidon/kubelet:v1.35.4")
	}
	// The controller-manager lifts the not-ready taint a moment after a
	// node turns Ready; until then the scheduler avoids the node.
	eventually(t, 60*time.Second, "the new nodes to lose their startup taints", func() bool {
		for _, name := range names {
			n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil || len(n.Spec.Taints) > 0 {
				return false
			}
		}
		return true
	})
}

func deployment(name string, replicas int32, nodeSelector map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
				},
			},
		},
	}
}

// runningPods lists the app's pods that run (not terminating), by node.
func runningPods(t *testing.T, cp *controlplane.ControlPlane, app string) map[string]int {
	t.Helper()
	pods, err := cp.Client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

func TestNodeRemoveDrainsStopsDeletesAndCleans(t *testing.T) {
	mainLane.join(t)
	cp, inv := kubeLab(t)
	freshNodes(t, cp, "worker-1", "worker-2")
	ctx := t.Context()
	// Only on this lab's nodes: other tests' nodes share the API server.
	spread := deployment("spread", 4, nil)
	spread.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"controller-1", "worker-1", "worker-2"}}},
		}}},
	}}
	if _, err := cp.Client.AppsV1().Deployments("default").Create(ctx, spread, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "4 pods running, some on worker-2", func() bool {
		byNode := runningPods(t, cp, "spread")
		total := 0
		for _, n := range byNode {
			total += n
		}
		return total == 4 && byNode["worker-2"] > 0
	})
	if err := labHost(t, "worker-2").WriteFile("/var/lib/kubelet/pki/kubelet.crt", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, code, errOut := runWaitInv(t, "node-remove", inv, "--set", "node=worker-2", "--set", "drainTimeout=60s")
	if code != 0 {
		t.Fatalf("node-remove: exit %d: %s\n%+v", code, errOut, p)
	}
	if _, err := cp.Client.CoreV1().Nodes().Get(ctx, "worker-2", metav1.GetOptions{}); err == nil {
		t.Error("the Node still exists")
	}
	out, _ := labHost(t, "worker-2").Exec(ctx, "systemctl", "is-active", "kubelet")
	if strings.TrimSpace(string(out)) != "inactive" {
		t.Errorf("kubelet on worker-2 is %q", out)
	}
	if hostFileExists(t, "worker-2", "/var/lib/kubelet/pki/kubelet.crt") {
		t.Error("kubelet state left on the host")
	}
	eventually(t, 60*time.Second, "the evicted pods to run elsewhere", func() bool {
		byNode := runningPods(t, cp, "spread")
		return byNode["worker-2"] == 0 && byNode["worker-1"]+byNode["controller-1"] == 4
	})
	if s := step(t, p, "drain"); s.State != workflows.StateSucceeded {
		t.Errorf("drain = %+v", s)
	}

	// The last controller is never removed.
	_, code, errOut = runWaitInv(t, "node-remove", inv, "--set", "node=controller-1")
	if code == 0 || !strings.Contains(errOut, "controller-1 is the last controller") {
		t.Errorf("removing the last controller: exit %d: %s", code, errOut)
	}
}

func TestDrainBlockedByPodDisruptionBudget(t *testing.T) {
	mainLane.join(t)
	cp, inv := kubeLab(t)
	freshNodes(t, cp, "worker-1")
	ctx := t.Context()
	if _, err := cp.Client.AppsV1().Deployments("default").Create(ctx,
		deployment("guarded", 1, map[string]string{"kubernetes.io/hostname": "worker-1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded-pdb", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the guarded pod to run and its budget to allow no disruption", func() bool {
		pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "guarded-pdb", metav1.GetOptions{})
		return err == nil && runningPods(t, cp, "guarded")["worker-1"] == 1 && pdb.Status.CurrentHealthy == 1 && pdb.Status.DisruptionsAllowed == 0
	})
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: drain-guarded}
steps:
  - id: drain
    action: kube.drain
    on: worker-1
    with: {timeout: 8s, retryDelay: 1s}
`)
	_, code, errOut := runWaitInv(t, rb, inv)
	if code == 0 {
		t.Fatal("a drain past a PodDisruptionBudget succeeded")
	}
	for _, want := range []string{"DrainBlocked", "default/guarded-pdb", "default/guarded-"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("error lacks %q: %s", want, errOut)
		}
	}
	if runningPods(t, cp, "guarded")["worker-1"] != 1 {
		t.Error("the guarded pod was evicted")
	}
	_ = cp.Client.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "guarded-pdb", metav1.DeleteOptions{})
	_, _ = cp.Client.CoreV1().Nodes().Patch(ctx, "worker-1", types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
}

var five struct {
	once      sync.Once
	lab       *testhosts.Lab
	inventory string
	workers   []string
	err       error
}

// fiveWorkers starts (once) six more hosts, one controller and five
// workers named five-worker-N in Kubernetes, each running the kubelet
// simulator at v1.35.3.
func fiveWorkers(t *testing.T) (*controlplane.ControlPlane, *testhosts.Lab, string, []string) {
	t.Helper()
	cp, _ := kubeLab(t)
	five.once.Do(func() {
		dir := filepath.Join(world.dir, "five")
		names := lab.Names(6)
		l, err := testhosts.Start(context.Background(), testhosts.Options{Count: 6, Names: names, BaseIP: "127.0.22.", Dir: filepath.Join(dir, "hosts")})
		if err != nil {
			five.err = err
			return
		}
		five.lab = l
		atWorldEnd(func() { _ = l.Close() })
		text := strings.Replace(lab.Inventory("five", l, l.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1)
		text = strings.ReplaceAll(text, "name: worker-", "name: five-worker-")
		five.inventory = filepath.Join(dir, "inventory.yaml")
		if five.err = os.WriteFile(five.inventory, []byte(text), 0o644); five.err != nil {
			return
		}
		for _, h := range l.Hosts[1:] {
			five.workers = append(five.workers, "five-"+h.Name)
			installKubelet(t, cp, h, "five-"+h.Name, "quay.io/poseidon/kubelet:v1.35.3")
		}
	})
	if five.err != nil {
		t.Fatal(five.err)
	}
	eventually(t, 60*time.Second, "five workers Ready", func() bool {
		for _, w := range five.workers {
			n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), w, metav1.GetOptions{})
			if err != nil || !nodeIsReady(n) {
				return false
			}
		}
		return true
	})
	return cp, five.lab, five.inventory, five.workers
}

func TestRollingKubeletImageSwapOverFiveWorkers(t *testing.T) {
	mainLane.join(t)
	cp, l, inv, workers := fiveWorkers(t)
	p, code, errOut := runWaitInv(t, "kubelet-image-swap", inv, "--set", "image=quay.io/poseidon/kubelet:v1.35.4",
		"--set", "nodes=workers", "--set", "maxUnavailable=2", "--set", "approveControllers=false")
	if code != 0 {
		t.Fatalf("rollout failed: exit %d: %s\n%+v", code, errOut, p)
	}
	for i, w := range workers {
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), w, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.NodeInfo.KubeletVersion != "v1.35.4" || n.Spec.Unschedulable {
			t.Errorf("%s: kubelet %s, unschedulable %v", w, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
		}
		data, err := l.Hosts[i+1].ReadFile("/etc/systemd/system/kubelet.service.d/10-image.conf")
		if err != nil || !strings.Contains(string(data), "v1.35.4") {
			t.Errorf("%s drop-in: %q %v", w, data, err)
		}
	}
	// The window: never more than two node runbooks at once, and each new
	// node started when one finished.
	starts, ends := childTimes(t, workers)
	most := 0
	for i := range workers {
		running := 0
		for j := range workers {
			if !starts[j].After(starts[i]) && ends[j].After(starts[i]) {
				running++
			}
		}
		most = max(most, running)
	}
	if most != 2 {
		t.Errorf("at most %d nodes ran at once, want 2 (starts %v, ends %v)", most, starts, ends)
	}
}

// installKubelet joins a lab host to the test control plane; the kubelet
// authenticates as system:node:NODE.
func installKubelet(t testing.TB, cp *controlplane.ControlPlane, h *testhosts.Host, node, image string) {
	t.Helper()
	kc, err := cp.NodeKubeconfig(node)
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.InstallKubelet(t.Context(), h, kc, node, image); err != nil {
		t.Fatal(err)
	}
}

// childTimes reads when each node's child runbook started and ended.
func childTimes(t *testing.T, workers []string) (starts, ends []time.Time) {
	t.Helper()
	for _, w := range workers {
		d, err := world.client.DescribeWorkflowExecution(t.Context(), "five/node/"+w, "")
		if err != nil {
			t.Fatalf("child of %s: %v", w, err)
		}
		starts = append(starts, d.WorkflowExecutionInfo.StartTime.AsTime())
		ends = append(ends, d.WorkflowExecutionInfo.CloseTime.AsTime())
	}
	return starts, ends
}

// A wait a killed worker began keeps its deadline on the worker that
// takes it over: the lost attempt's heartbeat (when it began) reaches the
// next attempt, sealed, and the wait ends at the first attempt's deadline,
// naming when it began, not a whole timeout after the new worker picked
// it up. The wait's 45 s outlast the 30 s heartbeat timeout that hands it
// to the new worker.
func TestKubeWaitNodeResumesAfterTheWorkerIsKilled(t *testing.T) {
	mainLane.join(t)
	_, inv := kubeLab(t)
	const queue = "resume-wait"
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: wait-resumed}
steps:
  - id: wait
    action: kube.wait-node
    on: controller-1
    retry: {maxAttempts: 1}
    with: {timeout: 45s, kubeletVersion: v0.0.0-never}
`)
	first := startWorker(t, queue, inv)
	out, errOut, code := kedge(t, "run", rb, "--inventory", inv, "--task-queue", queue, "--output", "json")
	if code != 0 {
		t.Fatalf("kedge run: exit %d: %s", code, errOut)
	}
	var started struct {
		WorkflowID string `json:"workflowId"`
	}
	if err := json.Unmarshal([]byte(out), &started); err != nil {
		t.Fatal(err)
	}
	id := started.WorkflowID
	eventually(t, 60*time.Second, "the wait's first heartbeat", func() bool {
		d, err := world.client.DescribeWorkflowExecution(t.Context(), id, "")
		if err != nil {
			return false
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == "kube.wait-node" && a.GetHeartbeatDetails() != nil {
				return true
			}
		}
		return false
	})
	killedAt := time.Now().UTC()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	startWorker(t, queue, inv)

	p, code := watch(t, id)
	if code == 0 || p.State != workflows.StateFailed {
		t.Fatalf("the wait for a node that never registers succeeded: %+v", p)
	}
	s := step(t, p, "wait")
	// Another test may have registered controller-1: the version asked
	// for is one no kubelet reports, so the wait never ends early.
	m := regexp.MustCompile(`waiting since (\S+) \(`).FindStringSubmatch(s.LastError)
	if m == nil {
		t.Fatalf("the wait's error names no start: %q", s.LastError)
	}
	since, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		t.Fatal(err)
	}
	if !since.Before(killedAt) {
		t.Errorf("the resumed wait began at %s, after the first worker was killed at %s: it started over", since, killedAt.Format(time.RFC3339))
	}
	if s.Attempts != 2 {
		t.Errorf("%d attempts, want 2 (the lost one and its resumption)", s.Attempts)
	}
}
