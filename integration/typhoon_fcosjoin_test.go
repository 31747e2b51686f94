package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/integration/testhosts"
)

// The bare Fedora CoreOS host of the Typhoon world that
// TestNodeJoinFCOSOnTyphoonCluster joins, and its reference worker.
const (
	fcosSpare     = "tyw4"
	fcosReference = "tyw2"
)

// What Typhoon's Fedora CoreOS worker template puts on the host besides
// the kubelet's own files, and node-join copies from the reference.
var fcosHostFiles = []string{
	layout.ContainerdConfig,
	"/etc/modules-load.d/typhoon.conf",
	"/etc/sysctl.d/max-user-watches.conf",
	"/etc/sysctl.d/reverse-path-filter.conf",
	layout.UnitDir + "/wait-for-dns.service",
}

// node-join of a bare Fedora CoreOS host (tyw4) like the Typhoon world's
// Fedora CoreOS worker (tyw2), which for the length of the test registers
// with labels and a taint of its own: the new worker gets tyw2's kubelet
// files made for it, with the inventory's labels and taint in place of
// tyw2's; Typhoon's host files (containerd's configuration, the kernel
// modules and sysctls, wait-for-dns.service with its requires link);
// containerd enabled and running before the kubelet; and is Ready with
// the inventory's labels and taint only, again after a reboot. A
// controller as the reference is refused before anything changes.
func TestNodeJoinFCOSOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	cs, ctx := typhoonBuilt.client, t.Context()
	ref, h := typhoonHost(t, fcosReference), typhoonHost(t, fcosSpare)
	node := typhoonFQDN(fcosSpare)

	// The test hosts share the machine's kernel: kernel modules and
	// sysctls are the world's stand-ins' to check and record on the host
	// alone, and containerd a stand-in unit of the host's own (not the
	// machine's packaged one), disabled and stopped as on a bare Fedora
	// CoreOS host.
	for _, f := range []string{testhosts.StandInDir + "/modprobe", testhosts.StandInDir + "/sysctl", layout.UnitDir + "/" + layout.ContainerdService} {
		if _, err := h.ReadFile(f); err != nil {
			t.Fatalf("the Typhoon world gives %s no %s (the machine's modprobe and sysctl would change the machine's kernel): %v", fcosSpare, f, err)
		}
	}
	for q, want := range map[string]string{"is-enabled": "disabled", "is-active": "inactive"} {
		if out, _ := h.Exec(ctx, "systemctl", q, layout.ContainerdService); strings.TrimSpace(string(out)) != want {
			t.Fatalf("%s, a bare Fedora CoreOS host: systemctl %s %s: %q, want %s", fcosSpare, q, layout.ContainerdService, out, want)
		}
	}
	machineWatches, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fcosHostFiles {
		if _, err := ref.ReadFile(f); err != nil {
			t.Fatalf("%s, a Fedora CoreOS worker of Typhoon's, has no %s: %v", fcosReference, f, err)
		}
	}

	// tyw2 registers with labels and a taint of its own (Typhoon's
	// worker_node_labels and worker_node_taints, as its template writes
	// them), read by node-join from its unit file; put back after.
	unit := layout.UnitDir + "/" + layout.KubeletService
	orig, err := ref.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	role := ""
	for _, l := range strings.SplitAfter(string(orig), "\n") {
		if strings.TrimSpace(l) == "--node-labels="+layout.WorkerRoleLabel {
			role = l
		}
	}
	if role == "" || strings.Count(string(orig), role) != 1 || !strings.HasSuffix(role, "\n") {
		t.Fatalf("%s's %s does not end its kubelet's command with Typhoon's role label:\n%s", fcosReference, unit, orig)
	}
	indent := role[:len(role)-len(strings.TrimLeft(role, " \t"))]
	refName := regexp.MustCompile(`--hostname-override=(\S+)`).FindStringSubmatch(string(orig))
	if refName == nil {
		t.Fatalf("%s's %s has no --hostname-override", fcosReference, unit)
	}
	own := strings.Replace(string(orig), role, indent+"--node-labels=node.kubernetes.io/pool="+fcosReference+" \\\n"+indent+"--register-with-taints=dedicated="+fcosReference+":NoSchedule \\\n"+role, 1)
	if err := ref.WriteFile(unit, []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ref.WriteFile(unit, orig, 0o644) })

	base, err := os.ReadFile(typhoonBuilt.inventory)
	if err != nil {
		t.Fatal(err)
	}
	labels := []string{"node.kubernetes.io/pool=fcos", "node-role.kubernetes.io/spare=true"}
	taint := "example.com/spare=true:NoSchedule"
	inv := string(base) + fmt.Sprintf("  - name: %s\n    nodeName: %s\n    address: %s\n    port: %d\n    labels: [%s]\n    taints: [%q]\n",
		fcosSpare, node, h.Address, h.Port, strings.Join(labels, ", "), taint)
	invPath := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(invPath, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, u := range []string{"kubelet.service", "containerd.service"} {
				b, _ := h.ReadFile("/var/log/units/" + u + ".log")
				t.Logf("%s %s log tail:\n%s", fcosSpare, u, tail(string(b), 4000))
			}
		}
	})

	before := map[string]string{}
	for _, f := range append([]string{unit}, fcosHostFiles...) {
		b, _ := h.ReadFile(f) // a bare host may have some (containerd's own configuration)
		before[f] = string(b)
	}
	p, code, errOut := runWaitInv(t, "node-join", invPath, "--set", "node="+fcosSpare, "--set", "like=tyc2")
	if code == 0 || !strings.Contains(step(t, p, "like-files").LastError, "tyc2 is a controller") {
		t.Errorf("node-join like a controller: exit %d: %s\n%+v", code, errOut, p)
	}
	for f, was := range before {
		if b, _ := h.ReadFile(f); string(b) != was {
			t.Errorf("the refused join changed %s", f)
		}
	}

	began := time.Now()
	p, code, errOut = runWaitInv(t, "node-join", invPath, "--set", "node="+fcosSpare, "--set", "like="+fcosReference)
	t.Logf("node-join of a bare Fedora CoreOS host: %s", time.Since(began).Round(time.Second))
	if code != 0 {
		t.Fatalf("node-join %s: exit %d: %s\n%+v", fcosSpare, code, errOut, p)
	}
	checkFCOSJoined(t, h, labels, taint)

	// The kernel modules and sysctls of Typhoon's files, loaded and set on
	// the host (as its stand-ins record them), the machine's kernel left
	// as it was.
	loads, err := h.ReadFile("/var/log/kedge-lab/modprobe.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"nf_conntrack", "br_netfilter"} {
		if !regexp.MustCompile(`(?m)^\S+ ` + m + ` `).Match(loads) {
			t.Errorf("%s's modprobe log has no %s:\n%s", fcosSpare, m, loads)
		}
	}
	for key, want := range map[string]string{"net.ipv4.conf.default.rp_filter": "0", "net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.lo.rp_filter": "0", "fs.inotify.max_user_watches": "16184"} {
		if out, err := h.Exec(ctx, "sysctl", "-n", key); err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%s: sysctl -n %s: %q (%v), want %s", fcosSpare, key, out, err, want)
		}
	}
	if b, err := h.ReadFile("/var/lib/kedge-lab/sysctl.conf"); err != nil || !strings.Contains(string(b), "\nnet.ipv4.conf.default.rp_filter = 0\n") || !strings.Contains(string(b), "\nnet.ipv4.conf.all.rp_filter = 0\n") {
		t.Errorf("%s's recorded sysctls (%v):\n%s", fcosSpare, err, b)
	}
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err != nil || string(b) != string(machineWatches) {
		t.Errorf("the machine's fs.inotify.max_user_watches is %q (%v), was %q", b, err, machineWatches)
	}

	// The files: tyw2's kubelet.service for tyw4 with the inventory's
	// labels (those the kubelet may set) and taint in place of tyw2's;
	// the rest as on tyw2.
	got, err := h.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(orig), refName[0], "--hostname-override="+node, 1)
	want = strings.Replace(want, role, indent+"--node-labels=node.kubernetes.io/pool=fcos \\\n"+indent+"--register-with-taints="+taint+" \\\n"+role, 1)
	if string(got) != want {
		t.Errorf("%s's %s:\n%s\nwant\n%s", fcosSpare, unit, got, want)
	}
	for _, f := range append([]string{"/etc/kubernetes/kubelet.yaml", layout.UnitDir + "/" + layout.KubeletPath}, fcosHostFiles...) {
		w, werr := ref.ReadFile(f)
		g, gerr := h.ReadFile(f)
		if werr != nil || gerr != nil || string(g) != string(w) {
			t.Errorf("%s: on %s %v, on %s %v; want the same:\n%s\nwant\n%s", f, fcosReference, werr, fcosSpare, gerr, g, w)
		}
	}
	if target, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/root", h.PID()), layout.UnitDir, "kubelet.service.requires/wait-for-dns.service")); err != nil || !strings.HasSuffix(target, "/wait-for-dns.service") {
		t.Errorf("wait-for-dns.service's requires link: %q %v", target, err)
	}

	// containerd is enabled: after a reboot it runs again, and the
	// kubelet with it.
	// A heartbeat has whole seconds, and the kubelet posts its status
	// at start (then only when it changes, as the real one): one from
	// the reboot's second on is the new kubelet's.
	rebooting := time.Now().Truncate(time.Second)
	if err := h.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, fcosSpare+" Ready after its reboot", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(rebooting) {
				return true
			}
		}
		return false
	})
	checkFCOSJoined(t, h, labels, taint)
}

// checkFCOSJoined checks the joined Fedora CoreOS worker: Ready, with
// Typhoon's role label, the inventory's labels and taint and nothing of
// its reference's; containerd enabled and running.
func checkFCOSJoined(t *testing.T, h *testhosts.Host, labels []string, taint string) {
	t.Helper()
	n, err := typhoonBuilt.client.CoreV1().Nodes().Get(t.Context(), typhoonFQDN(fcosSpare), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeIsReady(n) {
		t.Errorf("%s is not Ready", fcosSpare)
	}
	if _, ok := n.Labels[layout.WorkerRoleLabel]; !ok {
		t.Errorf("%s labels %v: no Typhoon role label %s", fcosSpare, n.Labels, layout.WorkerRoleLabel)
	}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		if got, ok := n.Labels[k]; !ok || got != v {
			t.Errorf("%s labels %v: want %s", fcosSpare, n.Labels, l)
		}
	}
	var taints []string
	for _, x := range n.Spec.Taints {
		taints = append(taints, x.ToString())
	}
	if !slices.Equal(taints, []string{taint}) {
		t.Errorf("%s taints %q, want the inventory's only: %q", fcosSpare, taints, taint)
	}
	for _, args := range [][]string{{"is-enabled", "containerd.service"}, {"is-active", "containerd.service"}} {
		if out, err := h.Exec(t.Context(), "systemctl", args...); err != nil || !slices.Contains([]string{"enabled", "active"}, strings.TrimSpace(string(out))) {
			t.Errorf("%s: systemctl %v: %q %v", fcosSpare, args, out, err)
		}
	}
}
