package integration

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// TestControllerJoinKedge joins the spare as a controller of Kedge's
// layout in the place of one that is gone: kha-3's host is stopped (every
// process of it, its SSH too), its member removed through etcd's API
// and kha-5's added as etcd's member add does it for controller-replace,
// and controller-join-kedge, given the initial cluster the add returned,
// joins kha-5: etcd has three healthy members again, kha-5's API server
// answers at its own address, its Node is Ready, labelled and tainted as
// a controller. Before that, an initial cluster that does not list the
// node at its address, and one with an item that is no member's, are
// refused naming the field, before the host is changed.
func TestControllerJoinKedge(t *testing.T) {
	kedgeHALane.join(t)
	w := kedgeHAWorld(t)
	kha1, kha3, spare := w.controllers[0], w.controllers[2], w.spare
	inv := w.controllerInventory(t, "kha-3")
	join := func(initialCluster string) (workflows.Progress, int, string, time.Duration) {
		t.Helper()
		began := time.Now()
		p, code, errOut := runWaitInv(t, "controller-join-kedge", inv, "--set", "node="+spare.Name,
			"--set-file", "initialCluster="+keysFile(t, []string{initialCluster}))
		return p, code, errOut, time.Since(began)
	}
	bare := func(t *testing.T) {
		t.Helper()
		if out, err := spare.Exec(t.Context(), "sh", "-c", "test ! -e /etc/kubernetes/manifests && echo bare"); err != nil || string(out) != "bare\n" {
			t.Errorf("%s was changed: %q (%v)", spare.Name, out, err)
		}
	}

	t.Run("refused", func(t *testing.T) {
		p, code, errOut, _ := join("kha-1=https://127.0.61.1:2380,kha-2=https://127.0.61.2:2380,kha-5=https://127.0.61.55:2380")
		if st := step(t, p, "member"); code == 0 || st.State != workflows.StateFailed || !strings.Contains(st.LastError, `does not list kha-5 at its address`) {
			t.Errorf("an initial cluster without kha-5 at its address: exit %d, member %s: %s\n%s", code, st.State, st.LastError, errOut)
		}
		p, code, errOut, _ = join("kha-1=https://127.0.61.1:2380,kha-2=127.0.61.2:2380,kha-5=https://127.0.61.5:2380")
		if st := step(t, p, "controller"); code == 0 || st.State != workflows.StateFailed ||
			!strings.Contains(st.LastError, `etcdInitialCluster[1]: "127.0.61.2:2380" is not a peer URL https://IP:2380`) {
			t.Errorf("an initial cluster with a bad item: exit %d, controller %s: %s\n%s", code, st.State, st.LastError, errOut)
		}
		bare(t)
	})

	// kha-3 is gone: its sshd is the first process of its namespaces,
	// and everything it ran (kubelet, static pods) goes with it.
	if err := syscall.Kill(kha3.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.removeMember(t, kha1, kha3.Name)
	initialCluster := w.addMember(t, kha1, spare)
	t.Logf("etcd's initial cluster with %s: %s", spare.Name, initialCluster)

	p, code, errOut, took := join(initialCluster)
	if code != 0 {
		t.Fatalf("controller-join-kedge %s: exit %d: %s\n%+v", spare.Name, code, errOut, p)
	}
	t.Logf("controller-join-kedge of %s: %s end to end", spare.Name, took.Round(time.Second))
	w.checkJoined(t, kha1, spare, []string{"kha-1", "kha-2", "kha-5"})
}

// removeMember removes the member called name through the controller
// via, as node-remove does, asking again while etcd has no leader (the
// member gone may have led).
func (w *kedgeHA) removeMember(t *testing.T, via *testhosts.Host, name string) {
	t.Helper()
	eventually(t, 2*time.Minute, "the member "+name+" removed", func() bool {
		var list struct{ Members []etcdMember }
		if err := w.etcd(t, via, "/v3/cluster/member/list", map[string]any{}, &list); err != nil {
			t.Logf("list etcd's members: %v", err)
			return false
		}
		var id string
		for _, m := range list.Members {
			if m.Name == name {
				id = m.ID
			}
		}
		if id == "" {
			return true
		}
		var removed struct{}
		if err := w.etcd(t, via, "/v3/cluster/member/remove", map[string]any{"ID": id}, &removed); err != nil {
			t.Logf("remove %s's member: %v", name, err)
		}
		return false
	})
}

// addMember adds h's etcd member (not started) through the controller
// via, as etcd.add-member does, and returns etcd's initial cluster with
// it, name=peerURL in etcd's order, h named.
func (w *kedgeHA) addMember(t *testing.T, via, h *testhosts.Host) string {
	t.Helper()
	peer := fmt.Sprintf("https://%s:2380", h.Address)
	var added struct {
		Member  etcdMember
		Members []etcdMember
	}
	if err := w.etcd(t, via, "/v3/cluster/member/add", map[string]any{"peerURLs": []string{peer}}, &added); err != nil {
		t.Fatalf("add %s's member: %v", h.Name, err)
	}
	var items []string
	for _, m := range added.Members {
		name := m.Name
		if m.ID == added.Member.ID {
			name = h.Name
		}
		items = append(items, name+"="+m.PeerURLs[0])
	}
	return strings.Join(items, ",")
}

// checkJoined checks h joined as a controller: etcd's members, all
// started, are want; h's API server answers at h's own address (the
// admin's credentials, h's certificate checked against the cluster CA for
// h's address); its Node is Ready, labelled and tainted as a controller;
// and nothing of the machine listens on loopback or every address.
func (w *kedgeHA) checkJoined(t *testing.T, via, h *testhosts.Host, want []string) {
	t.Helper()
	if got := memberNames(w.members(t, via)); !slices.Equal(got, want) {
		t.Errorf("etcd's members: %v, want %v", got, want)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("https://"+h.Address+":6443", w.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context()); err != nil || string(body) != "ok" {
		t.Errorf("%s's API server: %q (%v)", h.Name, body, err)
	}
	checkNodesReady(t, cs, h.Name)
	n, err := cs.CoreV1().Nodes().Get(t.Context(), h.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels["node-role.kubernetes.io/controller"]; !ok || len(n.Spec.Taints) == 0 || n.Spec.Taints[0].Key != "node-role.kubernetes.io/controller" {
		t.Errorf("%s: labels %v taints %v", h.Name, n.Labels, n.Spec.Taints)
	}
	if l := loopbackListeners(t); len(l) > 0 {
		t.Errorf("listening on loopback or every address: %v", l)
	}
}
