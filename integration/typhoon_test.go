package integration

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
)

// startTyphoonKubelet lays a Typhoon worker out on a lab host (its
// flavour's worker template rendered for it: kubelet.service with
// Typhoon's v1.35.4 image, kubelet.path, kubelet.yaml; then the
// kubeconfig the kubelet.path waits for) and starts it the way the host would at boot:
// kubelet.path enabled and started, which starts kubelet.service once
// /etc/kubernetes/kubeconfig is there. The node's own credentials stand
// for what its TLS bootstrap would have left in /var/lib/kubelet.
func startTyphoonKubelet(t *testing.T, cp *controlplane.ControlPlane, h *testhosts.Host, flavor string) {
	t.Helper()
	kc, err := cp.NodeKubeconfig(h.Name)
	if err != nil {
		t.Fatal(err)
	}
	writeTyphoonHost(t, h, typhoon.Host{Name: h.Name, Domain: h.Name, Flavor: flavor}, nil, false)
	for path, data := range map[string][]byte{typhoon.BootstrapKubeconfig: kc, typhoon.KubeletKubeconfig: kc} {
		if err := h.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := testhosts.WriteCNIConfig(h); err != nil {
		t.Fatal(err)
	}
	// containerd's state directory, there on every Typhoon host (podman
	// refuses a volume whose source is missing).
	if out, err := h.Exec(t.Context(), "mkdir", "-p", "/var/lib/containerd", "/run/lock"); err != nil {
		t.Fatalf("%s: %v: %s", h.Name, err, out)
	}
	for _, args := range [][]string{{"start", "kubelet.path"}} {
		if out, err := h.Exec(t.Context(), "systemctl", args...); err != nil {
			t.Fatalf("systemctl %v on %s: %v: %s", args, h.Name, err, out)
		}
	}
	t.Cleanup(func() {
		_, _ = h.Exec(t.Context(), "systemctl", "stop", "kubelet.path", "kubelet.service")
		_ = cp.Client.CoreV1().Nodes().Delete(t.Context(), h.Name, metav1.DeleteOptions{})
	})
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := h.ReadFile("/var/log/units/kubelet.service.log")
			t.Logf("%s kubelet.service log:\n%s", h.Name, b)
		}
	})
	eventually(t, 60*time.Second, h.Name+" Ready", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), h.Name, metav1.GetOptions{})
		return err == nil && nodeIsReady(n)
	})
}

// kubelet-image-swap-node on Typhoon's Flatcar (docker run -d in
// ExecStartPre, docker logs -f) and Fedora CoreOS (podman run) nodes, with
// an arch-suffixed tag: the image is pulled with the node's own runtime
// before the cordon, the drop-in takes effect (systemd reports the new
// image), the kubelet runs it and reports the version the image holds.
func TestKubeletImageSwapOnTyphoonNodes(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	// The inventory's controller (the first host) is not touched: the
	// Typhoon workers are the two others.
	l := startLabOf(t, "127.0.42.", testhosts.Options{Names: []string{"ty-ctl", "ty-flatcar", "ty-fcos"}})
	workers := l.Hosts[1:]
	startTyphoonKubelet(t, cp, workers[0], typhoon.Flatcar)
	startTyphoonKubelet(t, cp, workers[1], typhoon.FCOS)
	inv := writeInventory(t, strings.Replace(lab.Inventory("typhoon", l, l.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1))

	// The Flatcar worker's image is set as Typhoon's docs say, in
	// 10-image-override.conf (which sorts before Kedge's 10-image.conf).
	const override = "/etc/systemd/system/kubelet.service.d/10-image-override.conf"
	if err := workers[0].WriteFile(override, []byte("[Service]\nEnvironment=KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.35.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := workers[0].Exec(t.Context(), "systemctl", "daemon-reload"); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}

	const image = "quay.io/poseidon/kubelet:v1.35.5-amd64"
	for i, h := range workers {
		runtime := []string{"docker", "podman"}[i]
		p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", inv, "--set", "node="+h.Name, "--set", "image="+image, "--set", "readyTimeout=60s")
		if code != 0 {
			t.Fatalf("swap on %s failed: exit %d: %s\n%+v", h.Name, code, errOut, p)
		}
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), h.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.NodeInfo.KubeletVersion != "v1.35.5" || n.Spec.Unschedulable {
			t.Errorf("%s after the swap: kubelet %s, unschedulable %v", h.Name, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
		}
		pulled := pulledAt(t, h, image)
		cordon := step(t, p, "cordon")
		if pulled.IsZero() || cordon.StartedAt == nil || !pulled.Before(*cordon.StartedAt) {
			t.Errorf("%s: %s pulled at %v, cordon started at %v: want a pull before the cordon", h.Name, image, pulled, cordon.StartedAt)
		}
		if b, _ := h.ReadFile(testhosts.PullLog); !strings.Contains(string(b), runtime+" "+image) {
			t.Errorf("%s: %s did not pull %s:\n%s", h.Name, runtime, image, b)
		}
		env, err := h.Exec(t.Context(), "systemctl", "show", "-p", "Environment", "kubelet.service")
		if err != nil || !strings.Contains(string(env), "KUBELET_IMAGE="+image) {
			t.Errorf("%s: systemd's kubelet.service environment: %s (%v)", h.Name, env, err)
		}
		ps, err := h.Exec(t.Context(), runtime, "ps")
		if err != nil || !strings.Contains(string(ps), image) {
			t.Errorf("%s: %s ps does not show the kubelet on %s:\n%s (%v)", h.Name, runtime, image, ps, err)
		}
	}
	// No dead override: the operator's file holds the new image, and
	// Kedge wrote no drop-in of its own beside it.
	if b, err := workers[0].ReadFile(override); err != nil || !strings.Contains(string(b), "KUBELET_IMAGE="+image) {
		t.Errorf("%s after the swap: %s (%v), want KUBELET_IMAGE=%s", workers[0].Name, b, err, image)
	}
	if _, err := workers[0].ReadFile(layout.ImageDropIn); err == nil {
		t.Errorf("%s: the swap wrote %s beside the operator's %s", workers[0].Name, layout.ImageDropIn, override)
	}
}

// node-remove on Typhoon workers: afterwards no kubelet runs, its
// credentials and the bootstrap kubeconfig are gone, kubelet.path is
// disabled; after a reboot of the host's units the Node does not come
// back.
func TestNodeRemoveOnTyphoonNodes(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	l := startLabOf(t, "127.0.43.", testhosts.Options{Names: []string{"tyr-ctl", "tyr-flatcar", "tyr-fcos"}})
	workers := l.Hosts[1:]
	startTyphoonKubelet(t, cp, workers[0], typhoon.Flatcar)
	startTyphoonKubelet(t, cp, workers[1], typhoon.FCOS)
	inv := writeInventory(t, strings.Replace(lab.Inventory("typhoon-rm", l, l.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1))

	for i, h := range workers {
		runtime := []string{"docker", "podman"}[i]
		p, code, errOut := runWaitInv(t, "node-remove", inv, "--set", "node="+h.Name)
		if code != 0 {
			t.Fatalf("node-remove %s: exit %d: %s\n%+v", h.Name, code, errOut, p)
		}
		checkTyphoonRemoved(t, cp.Client, h, h.Name, runtime)
		if err := h.Reboot(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A Typhoon node that kept its bootstrap kubeconfig would be
		// back within a heartbeat or two (the simulator posts every 2s).
		time.Sleep(6 * time.Second)
		checkTyphoonRemoved(t, cp.Client, h, h.Name, runtime)

		// Removing it again succeeds and changes nothing: no Node to
		// cordon or drain, units already stopped, files already gone.
		if _, code, errOut := runWaitInv(t, "node-remove", inv, "--set", "node="+h.Name); code != 0 {
			t.Errorf("node-remove %s again: exit %d: %s", h.Name, code, errOut)
		}
	}
}

// checkTyphoonRemoved checks, from the host and the API, that a removed
// Typhoon node stays removed.
func checkTyphoonRemoved(t *testing.T, cs kubernetes.Interface, h *testhosts.Host, node, runtime string) {
	t.Helper()
	if _, err := cs.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{}); err == nil {
		t.Errorf("%s: the Node %s is there", h.Name, node)
	}
	for _, unit := range []string{"kubelet.service", "kubelet.path"} {
		if out, _ := h.Exec(t.Context(), "systemctl", "is-active", unit); strings.TrimSpace(string(out)) == "active" {
			t.Errorf("%s: %s is active", h.Name, unit)
		}
		if out, _ := h.Exec(t.Context(), "systemctl", "is-enabled", unit); strings.TrimSpace(string(out)) == "enabled" {
			t.Errorf("%s: %s is enabled", h.Name, unit)
		}
	}
	for _, f := range []string{typhoon.BootstrapKubeconfig, typhoon.KubeletKubeconfig, "/var/lib/kubelet/pki"} {
		if _, err := h.ReadFile(f); err == nil {
			t.Errorf("%s: %s is still there", h.Name, f)
		}
	}
	if ps, err := h.Exec(t.Context(), runtime, "ps"); err != nil || strings.Contains(string(ps), "kubelet") {
		t.Errorf("%s: %s ps: %s (%v)", h.Name, runtime, ps, err)
	}
}
