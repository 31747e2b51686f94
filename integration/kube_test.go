package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"kedge.dev/kedge/integration/controlplane"
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
func kubeLab(t *testing.T) (*controlplane.ControlPlane, string) {
	t.Helper()
	kubeWorld.once.Do(func() {
		dir := filepath.Join(world.dir, "kube")
		kubeWorld.cp, kubeWorld.err = controlplane.Start(context.Background(), controlplane.Options{Dir: dir})
		if kubeWorld.err != nil {
			return
		}
		world.cleanups = append(world.cleanups, func() { _ = kubeWorld.cp.Stop() })
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
	if code == 0 || !strings.Contains(errOut, "node controller-1 not Ready after 2s (not registered)") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// startKubelet installs the kubelet unit (Typhoon style: the kubelet runs as
// a container whose image comes from KUBELET_IMAGE) on a lab host and starts
// it; the container stand-in runs the kubelet simulator for that image.
func startKubelet(t *testing.T, cp *controlplane.ControlPlane, name, image string) {
	t.Helper()
	h := host(t, name)
	kc, err := cp.EmbeddedKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"/etc/kubernetes/kubelet.conf": string(kc),
		"/etc/kedge-lab/images":        "quay.io/poseidon/kubelet /usr/local/sbin/kubelet-sim\n",
		"/etc/systemd/system/kubelet.service": `[Unit]
Description=Kubelet (container)

[Service]
Environment=KUBELET_IMAGE=` + image + `
ExecStart=docker run --rm --name kubelet -v /etc/kubernetes:/etc/kubernetes:ro ${KUBELET_IMAGE} kubelet --kubeconfig=/etc/kubernetes/kubelet.conf --hostname-override=` + name + `

[Install]
WantedBy=multi-user.target
`,
	}
	for p, content := range files {
		if err := h.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := h.Exec(t.Context(), "systemctl", "start", "kubelet"); err != nil {
		t.Fatalf("start kubelet on %s: %v %s", name, err, out)
	}
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
}
