package integration

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// TestControllerReplaceOnKedgeLayout replaces a controller of Kedge's
// layout whose host is gone with the spare, listed as a controller. With
// kha-2's and kha-3's etcd down, controller-replace lost=kha-2 is refused
// for the quorum, changing nothing. Then kha-2's host is made unreachable
// (every process of it killed: kubelet, static pods, sshd) and
// controller-replace lost=kha-2 node=kha-5 snapshots etcd, removes kha-2's
// member and Node, adds kha-5's member and joins it (controller-join-kedge):
// etcd has 3 healthy members (kha-1, kha-3, kha-5), kha-5's API server
// answers at its own address and its Node is Ready as a controller.
func TestControllerReplaceOnKedgeLayout(t *testing.T) {
	kedgeHALane.join(t)
	w := kedgeHAWorld(t)
	ctx := t.Context()
	kha1, kha2, kha3, spare := w.controllers[0], w.controllers[1], w.controllers[2], w.spare
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := spare.ReadFile("/var/log/units/kubelet.service.log")
			t.Logf("%s kubelet log tail:\n%s", spare.Name, tail(string(b), 4000))
		}
	})
	inv, local, _ := backupsInventory(t, w.controllerInventory(t, ""))
	three := []string{"kha-1", "kha-2", "kha-3"}
	replace := func() (workflows.Progress, int, string, time.Duration) {
		began := time.Now()
		p, code, errOut := runWaitInv(t, "controller-replace", inv, "--set", "lost="+kha2.Name, "--set", "node="+spare.Name, "--set", "snapshot=local")
		return p, code, errOut, time.Since(began)
	}

	// kha-2's and kha-3's etcd down: kha-1 alone is no quorum of kha-1
	// and kha-3.
	for _, h := range []*testhosts.Host{kha2, kha3} {
		moveManifest(t, h, "/etc/kubernetes/manifests/etcd.yaml", "/etc/kubernetes/etcd.yaml.away")
		eventually(t, time.Minute, h.Name+"'s etcd stopped", func() bool { return !answers(h.Address + ":2379") })
	}
	p, code, errOut, took := replace()
	t.Logf("controller-replace with two members down, refused: %s", took.Round(time.Millisecond))
	if st := step(t, p, "etcd-check"); code == 0 || st.State != workflows.StateFailed ||
		!strings.Contains(st.LastError, "removing kha-2 would leave 2 members, of which 1 answer (not kha-3): a quorum needs 2") {
		t.Fatalf("controller-replace with two members down: exit %d, etcd-check %+v: %s", code, st, errOut)
	}
	for _, h := range []*testhosts.Host{kha2, kha3} {
		moveManifest(t, h, "/etc/kubernetes/etcd.yaml.away", "/etc/kubernetes/manifests/etcd.yaml")
	}
	eventually(t, 2*time.Minute, "every member back with a leader", func() bool {
		for _, h := range w.controllers {
			var st struct {
				Leader string `json:"leader"`
			}
			if err := w.etcd(t, h, "/v3/maintenance/status", map[string]any{}, &st); err != nil || st.Leader == "" || st.Leader == "0" {
				return false
			}
		}
		return true
	})
	if got := memberNames(w.members(t, kha1)); !slices.Equal(got, three) {
		t.Errorf("etcd's members after the refusal: %v", got)
	}
	if entries, _ := os.ReadDir(local); len(entries) != 0 {
		t.Errorf("the refused replace took a snapshot: %v", entries)
	}
	if out, err := spare.Exec(ctx, "sh", "-c", "test ! -e /etc/kubernetes && echo bare"); err != nil || string(out) != "bare\n" {
		t.Errorf("the refused replace changed %s: %q (%v)", spare.Name, out, err)
	}

	// kha-2's host is gone: its sshd is the first process of its
	// namespaces, and everything it ran goes with it.
	if err := syscall.Kill(kha2.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p, code, errOut, took = replace()
	t.Logf("controller-replace lost=kha-2 node=kha-5 on Kedge's layout: %s", took.Round(time.Second))
	for _, s := range p.Steps {
		if s.StartedAt != nil && s.EndedAt != nil {
			t.Logf("  %-24s %s", s.ID, s.EndedAt.Sub(*s.StartedAt).Round(time.Millisecond))
		}
	}
	if code != 0 {
		t.Fatalf("controller-replace: exit %d: %s\n%+v", code, errOut, p)
	}
	w.checkJoined(t, kha1, spare, []string{"kha-1", "kha-3", "kha-5"})
	if got := memberNames(w.members(t, spare)); !slices.Equal(got, []string{"kha-1", "kha-3", "kha-5"}) {
		t.Errorf("etcd's members as kha-5 answers: %v", got)
	}
	if _, err := w.client.CoreV1().Nodes().Get(ctx, kha2.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kha-2's Node after the replace: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(local, w.cluster, "etcd")); len(entries) != 2 {
		t.Errorf("the snapshot before the replace: %v, want one snapshot and its manifest", entries)
	}
}

// moveManifest renames a file on h: a static pod's manifest taken out of
// the kubelet's directory stops the pod, put back starts it.
func moveManifest(t *testing.T, h *testhosts.Host, from, to string) {
	t.Helper()
	if out, err := h.Exec(t.Context(), "mv", from, to); err != nil {
		t.Fatalf("mv %s %s on %s: %v: %s", from, to, h.Name, err, out)
	}
}

// answers says whether something accepts TCP connections at addr.
func answers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}
