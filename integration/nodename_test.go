package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// Node names come from the host. A kubelet that registers as an FQDN (as
// Typhoon's do, --hostname-override=${domain_name}) on a host the
// inventory names by its short name: with no nodeName, node-remove and
// kubelet-image-swap-node are refused at the layout, before anything
// changes, naming both names and where the kubelet's was read. With the
// Node deleted by hand while the kubelet runs, node-remove refuses to stop
// that kubelet. With `nodeName:` set, node-remove drains the node (its pod
// evicted) before it stops the kubelet, takes the cluster's secrets off
// the host, and a second run changes nothing.
func TestNodeNamesResolvedFromTheHost(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	l := startLabOf(t, "127.0.46.", testhosts.Options{Names: []string{"nn-ctl", "nn-worker"}})
	h := l.Hosts[1]
	const fqdn = "nn-worker.nodename.test"
	installKubelet(t, cp, h, fqdn, lab.KubeletImage)
	t.Cleanup(func() {
		_, _ = h.Exec(t.Context(), "systemctl", "stop", "kubelet")
		_ = cp.Client.CoreV1().Nodes().Delete(t.Context(), fqdn, metav1.DeleteOptions{})
		_ = cp.Client.AppsV1().Deployments("default").Delete(t.Context(), "nodename", metav1.DeleteOptions{})
	})
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := h.ReadFile("/var/log/units/kubelet.service.log")
			t.Logf("%s kubelet.service log:\n%s", h.Name, b)
		}
	})
	ready := func(what string) {
		t.Helper()
		eventually(t, 60*time.Second, what, func() bool {
			n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), fqdn, metav1.GetOptions{})
			return err == nil && nodeIsReady(n)
		})
	}
	ready(fqdn + " Ready")
	base := strings.Replace(lab.Inventory("nodename", l, l.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1)
	short := writeInventory(t, base)
	named := writeInventory(t, strings.Replace(base, "  - name: nn-worker\n", "  - name: nn-worker\n    nodeName: "+fqdn+"\n", 1))
	exists := func(path string) bool {
		_, err := h.ReadFile(path)
		return err == nil
	}
	kubeletActive := func() string {
		out, _ := h.Exec(t.Context(), "systemctl", "is-active", "kubelet")
		return strings.TrimSpace(string(out))
	}

	// 1. The inventory's short name: refused before the cordon, once.
	for _, c := range []struct{ runbook, extra string }{
		{"node-remove", "drainTimeout=30s"},
		{"kubelet-image-swap-node", "image=quay.io/poseidon/kubelet:v1.35.4"},
	} {
		p, code, errOut := runWaitInv(t, c.runbook, short, "--set", "node=nn-worker", "--set", c.extra)
		if code == 0 {
			t.Fatalf("%s with the short name succeeded: %+v", c.runbook, p)
		}
		st := step(t, p, "layout")
		if st.State != workflows.StateFailed || st.Attempts != 1 {
			t.Errorf("%s: layout %s after %d attempts, want failed after 1 (not retried)", c.runbook, st.State, st.Attempts)
		}
		for _, want := range []string{"NodeNameMismatch",
			`nn-worker: its kubelet registers the Node as "nn-worker.nodename.test" (--hostname-override in /etc/systemd/system/kubelet.service)`,
			`the inventory names it "nn-worker" and sets no other nodeName`,
			"set `nodeName: nn-worker.nodename.test` for nn-worker in the inventory"} {
			if !strings.Contains(st.LastError, want) {
				t.Errorf("%s: the refusal lacks %q:\n%s", c.runbook, want, st.LastError)
			}
		}
		if !strings.Contains(errOut, "nodeName: nn-worker.nodename.test") {
			t.Errorf("%s: the CLI does not tell the operator what to set: %s", c.runbook, errOut)
		}
		if s := step(t, p, "cordon"); s.Attempts != 0 {
			t.Errorf("%s: cordon ran: %+v", c.runbook, s)
		}
	}
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), fqdn, metav1.GetOptions{})
	if err != nil || n.Spec.Unschedulable || !nodeIsReady(n) {
		t.Fatalf("after the refusals the Node is %+v (%v), want Ready and schedulable", n, err)
	}
	if a := kubeletActive(); a != "active" || !exists("/var/lib/kubelet/kubeconfig") {
		t.Fatalf("after the refusals: kubelet %q, kubeconfig there %v", a, exists("/var/lib/kubelet/kubeconfig"))
	}

	// 2. No Node in the API, yet the kubelet runs: node-remove does not
	// stop a kubelet it did not drain.
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), fqdn, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, code, errOut := runWaitInv(t, "node-remove", named, "--set", "node=nn-worker")
	if code == 0 {
		t.Fatalf("node-remove stopped a kubelet whose Node it never saw: %+v", p)
	}
	if st := step(t, p, "kubelet-drained"); st.State != workflows.StateFailed ||
		!strings.Contains(st.LastError, "has no Node nn-worker.nodename.test, but the host's kubelet is live (kubelet.service active, enabled)") {
		t.Errorf("kubelet-drained: %s %q\n%s", st.State, st.LastError, errOut)
	}
	if a := kubeletActive(); a != "active" || !exists("/var/lib/kubelet/kubeconfig") {
		t.Fatalf("after the refusal: kubelet %q, kubeconfig there %v", a, exists("/var/lib/kubelet/kubeconfig"))
	}
	// Restarted, the kubelet registers its Node again.
	if out, err := h.Exec(t.Context(), "systemctl", "restart", "kubelet"); err != nil {
		t.Fatalf("restart kubelet: %v %s", err, out)
	}
	ready(fqdn + " registered again")

	// 3. With nodeName: drained (its pod evicted) before the kubelet
	// stops, then removed; a cluster key left on the host goes, its
	// certificate stays.
	if _, err := cp.Client.AppsV1().Deployments("default").Create(t.Context(),
		deployment("nodename", 1, map[string]string{"kubernetes.io/hostname": fqdn}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod string
	eventually(t, 60*time.Second, "a pod running on "+fqdn, func() bool {
		pods, err := cp.Client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=nodename"})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == fqdn && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pod = p.Name
				return true
			}
		}
		return false
	})
	for path, data := range map[string]string{
		"/etc/kubernetes/pki/ca.key": "-----BEGIN RSA PRIVATE KEY-----\nnot a real key\n-----END RSA PRIVATE KEY-----\n",
		"/etc/kubernetes/pki/ca.crt": "-----BEGIN CERTIFICATE-----\nnot a real certificate\n-----END CERTIFICATE-----\n",
	} {
		if err := h.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, code, errOut = runWaitInv(t, "node-remove", named, "--set", "node=nn-worker", "--set", "drainTimeout=60s")
	if code != 0 {
		t.Fatalf("node-remove with nodeName: exit %d: %s\n%+v", code, errOut, p)
	}
	drain, stop := step(t, p, "drain"), step(t, p, "stop-kubelet")
	if drain.State != workflows.StateSucceeded || drain.EndedAt == nil || stop.StartedAt == nil || stop.StartedAt.Before(*drain.EndedAt) {
		t.Errorf("drain %+v, stop-kubelet %+v: want the drain done before the kubelet stops", drain, stop)
	}
	if _, err := cp.Client.CoreV1().Pods("default").Get(t.Context(), pod, metav1.GetOptions{}); err == nil {
		t.Errorf("pod %s is still there: not evicted", pod)
	}
	if _, err := cp.Client.CoreV1().Nodes().Get(t.Context(), fqdn, metav1.GetOptions{}); err == nil {
		t.Error("the Node is still there")
	}
	if a := kubeletActive(); a == "active" {
		t.Errorf("the kubelet is %q", a)
	}
	for _, f := range []string{"/var/lib/kubelet/kubeconfig", "/etc/kubernetes/pki/ca.key"} {
		if exists(f) {
			t.Errorf("%s is still on the host", f)
		}
	}
	if !exists("/etc/kubernetes/pki/ca.crt") {
		t.Error("the certificate was removed: only secrets go")
	}
	if rec, err := h.ReadFile("/var/lib/kedge/removed-secrets"); err != nil || !strings.Contains(string(rec), "/etc/kubernetes/pki/ca.key") {
		t.Errorf("removed-secrets does not list the key: %s (%v)", rec, err)
	}

	// 4. Again: succeeds and changes nothing (no Node to cordon or drain,
	// the kubelet stopped and disabled).
	p, code, errOut = runWaitInv(t, "node-remove", named, "--set", "node=nn-worker")
	if code != 0 {
		t.Fatalf("node-remove again: exit %d: %s\n%+v", code, errOut, p)
	}
	for _, id := range []string{"cordon", "drain"} {
		if s := step(t, p, id); s.State != workflows.StateSkipped {
			t.Errorf("second run: %s %s", id, s.State)
		}
	}
}
