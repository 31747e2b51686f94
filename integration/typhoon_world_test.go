package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/workflows"
)

// typhoonBuilt is a whole cluster laid out as Typhoon lays it out, with a
// PKI Kedge did not make: three controllers (Flatcar, Fedora CoreOS,
// Flatcar) each running etcd-member.service (a real etcd, quorum of
// three) and the control plane as Typhoon's static pods (the real
// kube-apiserver, controller-manager and scheduler), and two workers
// (Flatcar, Fedora CoreOS). Every kubelet runs from Typhoon's own
// kubelet.service, started by kubelet.path.
var typhoonBuilt = &typhoonLab{name: typhoonCluster, dir: "typhoon", hosts: typhoonHosts, baseIP: "127.0.45."}

// typhoonLab is one Typhoon world: the shared one (typhoonBuilt), or
// one a disaster-recovery test builds for itself (typhoonDRWorld).
type typhoonLab struct {
	// name is the cluster's name (the inventory's, Vault's paths); dir
	// the world's directory under world.dir; hosts what it is built of,
	// from baseIP+1 on.
	name, dir  string
	baseIP     string
	hosts      []typhoonHostSpec
	once       sync.Once
	lab        *testhosts.Lab
	pki        *typhoon.PKI
	inventory  string
	kubeconfig string
	client     kubernetes.Interface
	// adopted: Vault keeps the world's CAs (adoptTyphoon).
	adopted bool
	err     error
	closed  sync.Once
	// handOn: the disaster-recovery test using the world leaves it whole;
	// if it passes, the lane's next test gets it instead of building one.
	handOn bool
}

// closeTyphoon stops the shared Typhoon world's hosts (and everything
// they run), once: after the last test that uses it, or at the end.
func closeTyphoon() { typhoonBuilt.close() }

// close stops the world's hosts, once.
func (w *typhoonLab) close() {
	w.closed.Do(func() {
		if w.lab != nil {
			_ = w.lab.Close()
		}
		if w.err == nil {
			w.err = fmt.Errorf("the Typhoon world %s was stopped after its last test", w.name)
		}
	})
}

// typhoonWorld builds the Typhoon cluster once for the tests that use it.
func typhoonWorld(t *testing.T) {
	t.Helper()
	typhoonBuilt.once.Do(func() {
		began := time.Now()
		typhoonBuilt.err = buildTyphoon(t, typhoonBuilt)
		t.Logf("Typhoon-built cluster of 3 controllers + 2 workers: %s", time.Since(began).Round(time.Second))
	})
	if typhoonBuilt.err != nil {
		t.Fatal(typhoonBuilt.err)
	}
}

// waitTyphoonReady waits until every node is Ready, saying which are not
// when it gives up.
func waitTyphoonReady(ctx context.Context, cs kubernetes.Interface, names []string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var notReady []string
		for _, n := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || !nodeIsReady(node) {
				notReady = append(notReady, n)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("typhoon world: not Ready after 3m: %v", notReady)
		}
		time.Sleep(time.Second)
	}
}

// typhoonHost is the world's host called name.
func typhoonHost(t *testing.T, name string) *testhosts.Host {
	t.Helper()
	for _, h := range typhoonBuilt.lab.Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no Typhoon host %s", name)
	return nil
}

// kubelet-image-swap over every node of the Typhoon-built cluster, the
// controllers included, with an arch-suffixed tag: each running kubelet
// reports the version the image holds; each node's image was pulled
// before its cordon; the control plane and etcd keep serving.
func TestKubeletImageSwapOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	cs := typhoonBuilt.client
	const image = "quay.io/poseidon/kubelet:v1.35.6-amd64"
	began := time.Now()
	p, code, errOut := runWaitInv(t, "kubelet-image-swap", typhoonBuilt.inventory, "--set", "image="+image,
		"--set", "approveControllers=false", "--set", "maxUnavailable=2")
	t.Logf("kubelet-image-swap over 3 controllers + 2 workers: %s", time.Since(began).Round(time.Second))
	if code != 0 {
		t.Fatalf("kubelet-image-swap: exit %d: %s\n%+v", code, errOut, p)
	}
	for i, h := range typhoonBuilt.lab.Hosts {
		if typhoonHosts[i].spare {
			continue
		}
		// One kubelet container, the new image's: none left over from a
		// start the restart raced with.
		runtime := map[string]string{typhoon.Flatcar: "docker", typhoon.FCOS: "podman"}[typhoonHosts[i].flavor]
		ps, err := h.Exec(t.Context(), runtime, "ps", "--format", "{{.Names}} {{.Image}}")
		var kubelets []string
		for _, l := range strings.Split(string(ps), "\n") {
			if strings.Contains(l, "kubelet") {
				kubelets = append(kubelets, l)
			}
		}
		if err != nil || !slices.Equal(kubelets, []string{"kubelet " + image}) {
			t.Errorf("%s: %s ps: %q (%v)", h.Name, runtime, ps, err)
		}
		n, err := cs.CoreV1().Nodes().Get(t.Context(), typhoonFQDN(h.Name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.NodeInfo.KubeletVersion != "v1.35.6" || n.Spec.Unschedulable || !nodeIsReady(n) {
			t.Errorf("%s: kubelet %s, unschedulable %v, ready %v", h.Name, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable, nodeIsReady(n))
		}
		node, err := queryProgress(workflows.NodeWorkflowID(typhoonCluster, h.Name))
		if err != nil {
			t.Fatalf("%s's node runbook: %v", h.Name, err)
		}
		cordon := step(t, node, "cordon")
		if pulled := pulledAt(t, h, image); pulled.IsZero() || cordon.StartedAt == nil || !pulled.Before(*cordon.StartedAt) {
			t.Errorf("%s: %s pulled at %v, cordon started at %v", h.Name, image, pulled, cordon.StartedAt)
		}
	}
	if b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context()); err != nil {
		t.Errorf("the API server after the swap: %s (%v)", b, err)
	}
}

// node-join of a bare host into the Typhoon-built cluster, with an
// inventory that says nothing of the cluster's DNS or kubelet image: the
// new worker gets a Typhoon worker's kubelet (tyw1's unit, drop-ins,
// kubelet.path and KubeletConfiguration, so Typhoon's cluster DNS
// 10.3.0.10), made for its own name, joins through TLS bootstrap with a
// token for this join only, runs tyw1's kubelet version, carries the
// inventory's labels beside Typhoon's, and comes back after its units
// restart (a reboot). A controller is refused before anything changes.
func TestNodeJoinOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	cs := typhoonBuilt.client
	ctx := t.Context()
	ref, h := typhoonHost(t, "tyw1"), typhoonHost(t, "tyw3")
	refNode, err := cs.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyw1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(typhoonBuilt.inventory)
	if err != nil {
		t.Fatal(err)
	}
	var inv strings.Builder
	for _, line := range strings.SplitAfter(string(base), "\n") {
		if !strings.HasPrefix(line, "  clusterDNS:") && !strings.HasPrefix(line, "  kubeletImage:") {
			inv.WriteString(line)
		}
	}
	fmt.Fprintf(&inv, "  - name: tyw3\n    nodeName: %s\n    address: %s\n    port: %d\n    labels: [node.kubernetes.io/pool=spare]\n", typhoonFQDN("tyw3"), h.Address, h.Port)
	invPath := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(invPath, []byte(inv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := func() int {
		list, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "type=bootstrap.kubernetes.io/token"})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	before := tokens()

	p, code, errOut := runWaitInv(t, "node-join", invPath, "--set", "node=tyc3")
	if code == 0 || !strings.Contains(step(t, p, "like-worker").LastError, "tyc3 is a controller") {
		t.Errorf("node-join of a controller: exit %d: %s\n%+v", code, errOut, p)
	}
	if got := tokens(); got != before {
		t.Errorf("the refused join left %d bootstrap tokens, %d before", got, before)
	}

	began := time.Now()
	p, code, errOut = runWaitInv(t, "node-join", invPath, "--set", "node=tyw3")
	joined := time.Now() // the join's token was last used before
	t.Logf("node-join of a Typhoon worker: %s", time.Since(began).Round(time.Second))
	if code != 0 {
		for _, hh := range []*testhosts.Host{h} {
			b, _ := hh.ReadFile("/var/log/units/kubelet.service.log")
			t.Logf("%s kubelet.service log tail:\n%s", hh.Name, tail(string(b), 4000))
		}
		t.Fatalf("node-join tyw3: exit %d: %s\n%+v", code, errOut, p)
	}
	if s := step(t, p, "kubelet-unit"); s.State != "skipped" {
		t.Errorf("Kedge's own kubelet unit was rendered: %+v", s)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyw3"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeIsReady(n) || n.Status.NodeInfo.KubeletVersion != refNode.Status.NodeInfo.KubeletVersion {
		t.Errorf("tyw3: ready %v, kubelet %q; tyw1's %q", nodeIsReady(n), n.Status.NodeInfo.KubeletVersion, refNode.Status.NodeInfo.KubeletVersion)
	}
	if _, ok := n.Labels["node.kubernetes.io/node"]; !ok || n.Labels["node.kubernetes.io/pool"] != "spare" {
		t.Errorf("tyw3 labels %v: want Typhoon's node.kubernetes.io/node and the inventory's pool", n.Labels)
	}

	// Typhoon's files, made for tyw3: kubelet.service exactly as Typhoon's
	// worker template renders it for tyw3 with the inventory's labels
	// (none of tyw1's own); the same KubeletConfiguration and kubelet.path
	// as tyw1's.
	var controllers []typhoon.Host
	for _, c := range typhoonHosts {
		if c.controller && !c.spare {
			controllers = append(controllers, typhoon.Host{Name: c.name, Domain: typhoonFQDN(c.name), Flavor: c.flavor, Controller: true})
		}
	}
	typhoons, err := typhoonMachine(typhoon.Host{Name: "tyw3", Domain: typhoonFQDN("tyw3"), Flavor: typhoon.Flatcar,
		Labels: []string{"node.kubernetes.io/pool=spare"}}, controllers, h.Address)
	if err != nil {
		t.Fatal(err)
	}
	unit, ok := typhoons.File(typhoon.KubeletUnit)
	if got, err := h.ReadFile(typhoon.KubeletUnit); err != nil || !ok || string(got) != string(unit.Data) {
		t.Errorf("tyw3's kubelet.service (%v):\n%s\nwant, as Typhoon renders it for tyw3:\n%s", err, got, unit.Data)
	}
	// Flatcar's worker template's sysctl is applied on the host (the
	// sysctl stand-in records it there; the machine's stays).
	if out, err := h.Exec(ctx, "sysctl", "-n", "fs.inotify.max_user_watches"); err != nil || strings.TrimSpace(string(out)) != "16184" {
		t.Errorf("tyw3: fs.inotify.max_user_watches %q (%v), want Typhoon's 16184", out, err)
	}
	for _, f := range []string{typhoon.KubeletConfig, typhoon.KubeletPathUnit, layout.ImageDropIn,
		"/etc/sysctl.d/max-user-watches.conf", "/etc/systemd/logind.conf.d/inhibitors.conf", typhoon.WaitForDNSUnit} {
		want, werr := ref.ReadFile(f)
		got, gerr := h.ReadFile(f)
		if werr != nil || gerr != nil {
			if werr == nil || gerr == nil {
				t.Errorf("%s: on tyw1 %v, on tyw3 %v", f, werr, gerr)
			}
			continue
		}
		want = []byte(strings.ReplaceAll(string(want), "--hostname-override="+typhoonFQDN("tyw1")+" ", "--hostname-override="+typhoonFQDN("tyw3")+" "))
		if string(got) != string(want) {
			t.Errorf("tyw3's %s:\n%s\nwant\n%s", f, got, want)
		}
	}
	// What the cluster's DNS is, as Kedge reads the new node's layout.
	out, errOut, code := kedge(t, "inspect", "--inventory", invPath, "--node", "tyw3", "--output", "json")
	var reports []struct {
		Node   string        `json:"node"`
		Layout layout.Layout `json:"layout"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &reports) != nil || len(reports) != 1 {
		t.Fatalf("kedge inspect tyw3: exit %d: %s %s", code, out, errOut)
	}
	if l := reports[0].Layout; l.Kind != "typhoon-flatcar" || !slices.Equal(l.ClusterDNS, []string{typhoon.ClusterDNS}) || l.NodeName != typhoonFQDN("tyw3") {
		t.Errorf("tyw3's layout: %s, cluster DNS %v, node %s", l.Kind, l.ClusterDNS, l.NodeName)
	}
	// tyw3 keeps a standing token of its own, as Typhoon's nodes keep the
	// cluster's: no expiry, labelled for its Node, the only new one; the
	// bootstrap kubeconfig is root's.
	if got := tokens(); got != before+1 {
		t.Errorf("bootstrap tokens after the join: %d, before %d: want tyw3's standing one more", got, before)
	}
	standing, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "kedge.dev/bootstrap-node=" + typhoonFQDN("tyw3")})
	if err != nil || len(standing.Items) != 1 {
		t.Fatalf("tyw3's standing token: %v (%v)", standing, err)
	}
	if exp, ok := standing.Items[0].Data["expiration"]; ok {
		t.Errorf("tyw3's standing token expires at %s", exp)
	}
	if out, err := h.Exec(ctx, "stat", "-c", "%a", typhoon.BootstrapKubeconfig); err != nil || strings.TrimSpace(string(out)) != "600" {
		t.Errorf("%s mode %q (%v)", typhoon.BootstrapKubeconfig, out, err)
	}

	// kubelet.path is enabled as on Typhoon: after a reboot the kubelet
	// comes back and posts Ready again.
	// A heartbeat has whole seconds, and the kubelet posts its status
	// at start (then only when it changes, as the real one): one from
	// the reboot's second on is the new kubelet's.
	rebooting, bootBefore := time.Now().Truncate(time.Second), must(h.BootID())
	if err := h.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	readySince := func(since time.Time) func() bool {
		return func() bool {
			n, err := cs.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyw3"), metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since) {
					return true
				}
			}
			return false
		}
	}
	eventually(t, 2*time.Minute, "tyw3 Ready after its reboot", readySince(rebooting))
	checkNodeBootID(t, cs, h, typhoonFQDN("tyw3"), bootBefore)

	// Its client certificate lapses (the node was off longer than the
	// 72 hours Typhoon's controller manager signs for: the kubelet then
	// has no valid client credential, as here with none): like Typhoon's
	// nodes, it bootstraps again with the credential it kept and comes
	// back Ready, with a new client certificate. Before, the join's token
	// was revoked and the kubelet got 401 until re-joined by hand.
	old := kubeletClientCert(t, h)
	// The API server caches a token's successful authentication for 10 s
	// (kube-apiserver's TokenSuccessCacheTTL, not a flag): a token revoked
	// then still works for that long. The lapse comes after it, as it does
	// on a node that was off for days.
	time.Sleep(time.Until(joined.Add(11 * time.Second)))
	// kubelet.path would start the kubelet again at once: it stops first.
	if out, err := h.Exec(ctx, "sh", "-c", "systemctl stop kubelet.path kubelet.service && rm -f "+typhoon.KubeletKubeconfig+" /var/lib/kubelet/pki/kubelet-client-*"); err != nil {
		t.Fatalf("tyw3: lapse its client credential: %v: %s", err, out)
	}
	lapsed := time.Now().Truncate(time.Second)
	if out, err := h.Exec(ctx, "systemctl", "start", "kubelet.path", "kubelet.service"); err != nil {
		t.Fatalf("tyw3: start its kubelet: %v: %s", err, out)
	}
	if old == nil {
		t.Fatal("tyw3's kubelet had no client certificate before")
	}
	eventually(t, 2*time.Minute, "tyw3 Ready again with a new client certificate, bootstrapped with its standing token", func() bool {
		if _, err := h.ReadFile(typhoon.KubeletKubeconfig); err != nil {
			return false
		}
		c := kubeletClientCert(t, h)
		return c != nil && c.SerialNumber.Cmp(old.SerialNumber) != 0 && readySince(lapsed)()
	})
}

// node-remove on the Typhoon-built cluster, whose Nodes are named by the
// hosts' domains. An inventory of short host names without nodeName is
// refused at the layout, before the cordon, the Node and its kubelet
// untouched. With the right names a worker is drained (its pod evicted)
// before its kubelet stops; a worker under docker (Flatcar) and one under
// podman (Fedora CoreOS) go. While another controller's etcd is down,
// removing a controller would leave no quorum: refused before the cordon,
// its member kept. With etcd whole again the controller goes: its member
// is removed through etcd's API, its etcd unit and static pods stop, every
// cluster secret leaves its disk (CA, service-account and etcd keys,
// credential kubeconfigs, etcd's data) while certificates stay, and after
// a reboot of its units neither the Node nor the member comes back; etcd
// and the API stay healthy. Removing it again succeeds and changes
// nothing.
func TestNodeRemoveOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	// The last test of the Typhoon world (it removes nodes): its 3
	// control planes stop with it rather than run beside later tests.
	t.Cleanup(closeTyphoon)
	cs, inv := typhoonBuilt.client, typhoonBuilt.inventory
	ctx := t.Context()
	// Kedge removes etcd members with a certificate from etcd's CA, which
	// adopt took into Vault.
	adoptTyphoon(t)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range []string{"tyw1", "tyw2", "tyc3"} {
				b, _ := typhoonHost(t, h).ReadFile("/var/log/units/kubelet.service.log")
				t.Logf("%s kubelet.service log tail:\n%s", h, tail(string(b), 4000))
			}
		}
	})

	// Short names, no nodeName: refused before anything changes.
	base, err := os.ReadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	var short strings.Builder
	for _, line := range strings.SplitAfter(string(base), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "nodeName:") {
			short.WriteString(line)
		}
	}
	shortInv := filepath.Join(t.TempDir(), "short.yaml")
	if err := os.WriteFile(shortInv, []byte(short.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, code, errOut := runWaitInv(t, "node-remove", shortInv, "--set", "node=tyw1")
	if st := step(t, p, "layout"); code == 0 || st.State != workflows.StateFailed || st.Attempts != 1 ||
		!strings.Contains(st.LastError, `registers the Node as "tyw1.typhoon.test" (--hostname-override in /etc/systemd/system/kubelet.service)`) ||
		!strings.Contains(st.LastError, "nodeName: tyw1.typhoon.test") {
		t.Errorf("node-remove tyw1 by its short name: exit %d, layout %s after %d attempts: %s\n%s", code, st.State, st.Attempts, st.LastError, errOut)
	}
	if st := step(t, p, "cordon"); st.Attempts != 0 {
		t.Errorf("the refused removal cordoned: %+v", st)
	}
	if n, err := cs.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyw1"), metav1.GetOptions{}); err != nil || n.Spec.Unschedulable || !nodeIsReady(n) {
		t.Errorf("tyw1 after the refused removal: %v", err)
	}
	if out, err := typhoonHost(t, "tyw1").Exec(ctx, "systemctl", "is-active", "kubelet.service"); err != nil {
		t.Errorf("tyw1's kubelet after the refused removal: %s (%v)", out, err)
	}

	// With the right names: tyw1's pod is evicted before its kubelet stops.
	if _, err := cs.AppsV1().Deployments("default").Create(ctx,
		deployment("typhoon-drain", 1, map[string]string{"kubernetes.io/hostname": typhoonFQDN("tyw1")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod string
	eventually(t, 90*time.Second, "a pod running on tyw1", func() bool {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=typhoon-drain"})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == typhoonFQDN("tyw1") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pod = p.Name
				return true
			}
		}
		return false
	})
	for _, w := range []struct{ name, runtime string }{{"tyw1", "docker"}, {"tyw2", "podman"}} {
		p, code, errOut := runWaitInv(t, "node-remove", inv, "--set", "node="+w.name, "--set", "drainTimeout=60s")
		if code != 0 {
			t.Fatalf("node-remove %s: exit %d: %s\n%+v", w.name, code, errOut, p)
		}
		checkTyphoonRemoved(t, cs, typhoonHost(t, w.name), typhoonFQDN(w.name), w.runtime)
		if w.name != "tyw1" {
			continue
		}
		drain, stop := step(t, p, "drain"), step(t, p, "stop-kubelet")
		if drain.State != workflows.StateSucceeded || drain.EndedAt == nil || stop.StartedAt == nil || stop.StartedAt.Before(*drain.EndedAt) {
			t.Errorf("drain %+v, stop-kubelet %+v: want the drain done before the kubelet stops", drain, stop)
		}
		if _, err := cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{}); err == nil {
			t.Errorf("pod %s is still there: not evicted", pod)
		}
	}

	ctl, other := typhoonHost(t, "tyc3"), typhoonHost(t, "tyc2")
	if out, err := other.Exec(ctx, "systemctl", "stop", "etcd-member.service"); err != nil {
		t.Fatalf("stop etcd on tyc2: %v: %s", err, out)
	}
	p, code, errOut = runWaitInv(t, "node-remove", inv, "--set", "node=tyc3")
	if code == 0 || !strings.Contains(step(t, p, "etcd-check").LastError, "quorum") {
		t.Errorf("node-remove tyc3 with tyc2's etcd down: exit %d: %s\n%+v", code, errOut, p)
	}
	if n, err := cs.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyc3"), metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("tyc3 after the refused removal: %v (%v)", n.Spec.Unschedulable, err)
	}
	if out, err := other.Exec(ctx, "systemctl", "start", "etcd-member.service"); err != nil {
		t.Fatalf("start etcd on tyc2: %v: %s", err, out)
	}
	if got := etcdMembers(t); !slices.Equal(got, []string{"tyc1", "tyc2", "tyc3"}) {
		t.Fatalf("etcd members before the removal: %v", got)
	}
	eventually(t, time.Minute, "etcd healthy again", func() bool {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(ctx)
		return err == nil
	})

	for i := range 2 {
		p, code, errOut := runWaitInv(t, "node-remove", inv, "--set", "node=tyc3")
		if code != 0 {
			t.Fatalf("node-remove tyc3 (run %d): exit %d: %s\n%+v", i+1, code, errOut, p)
		}
		if i == 1 {
			for _, id := range []string{"cordon", "drain"} {
				if st := step(t, p, id); st.State != workflows.StateSkipped {
					t.Errorf("node-remove tyc3 again: %s %s", id, st.State)
				}
			}
		}
		checkTyphoonRemoved(t, cs, ctl, typhoonFQDN("tyc3"), "docker")
		for _, args := range [][]string{{"is-active", "etcd-member.service"}, {"is-enabled", "etcd-member.service"}} {
			if out, _ := ctl.Exec(ctx, "systemctl", args...); strings.TrimSpace(string(out)) == "active" || strings.TrimSpace(string(out)) == "enabled" {
				t.Errorf("tyc3: etcd-member.service %s: %s", args[0], out)
			}
		}
		if got := etcdMembers(t); !slices.Equal(got, []string{"tyc1", "tyc2"}) {
			t.Errorf("etcd members after removing tyc3: %v", got)
		}
		if i == 0 {
			if err := ctl.Reboot(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(6 * time.Second)
			checkTyphoonRemoved(t, cs, ctl, typhoonFQDN("tyc3"), "docker")
		}
	}
	// No cluster secret stays on the removed controller; certificates do.
	for _, f := range []string{typhoon.CAKey, typhoon.ServiceAccountKey, typhoon.APIServerKey, typhoon.EtcdClientKey, typhoon.AggregationKey,
		typhoon.AdminK, typhoon.ControllerManagerK, typhoon.SchedulerK, typhoon.EtcdServerKey, typhoon.EtcdPeerKey, "/var/lib/etcd"} {
		if _, err := ctl.ReadFile(f); err == nil || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("tyc3: %s is still there (%v)", f, err)
		}
	}
	for _, f := range []string{typhoon.CACert, typhoon.APIServerCert, typhoon.ServiceAccountPub, typhoon.AggregationCert, typhoon.EtcdServerCert} {
		if _, err := ctl.ReadFile(f); err != nil {
			t.Errorf("tyc3: the certificate %s went: %v", f, err)
		}
	}
	if b, err := ctl.ReadFile("/var/lib/kedge/removed-secrets"); err != nil || !strings.Contains(string(b), typhoon.CAKey) {
		t.Errorf("tyc3's removed-secrets list: %s (%v)", b, err)
	}
	if b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		t.Errorf("the API server after removing tyc3: %s (%v)", b, err)
	}
	if b, err := ctl.ReadFile("/var/lib/kedge/removed-manifests/kube-apiserver.yaml"); err != nil || len(b) == 0 {
		t.Errorf("tyc3's kube-apiserver manifest was not kept: %v", err)
	}
}

// etcdMembers lists the shared world's etcd members by name (etcdMembersVia).
func etcdMembers(t *testing.T) []string {
	t.Helper()
	return typhoonBuilt.etcdMembersVia(t, "tyc1")
}

// etcdClientOf is an HTTP client of the etcd of the controller called
// via, with the API server's etcd client certificate, and its address.
func (w *typhoonLab) etcdClientOf(t *testing.T, via string) (*http.Client, string) {
	t.Helper()
	h := w.host(t, via)
	certPEM, keyPEM := must(h.ReadFile(typhoon.EtcdClientCert)), must(h.ReadFile(typhoon.EtcdClientKey))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(w.pki.EtcdCA())
	// After a CA rotation, the CA etcd's certificates come from now.
	roots.AppendCertsFromPEM(must(h.ReadFile(typhoon.EtcdServerCA)))
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "localhost"}}}
	return cl, h.Address
}

// etcdServerVersion is the version the etcd of the controller called via
// reports (GET /version).
func (w *typhoonLab) etcdServerVersion(t *testing.T, via string) string {
	t.Helper()
	cl, addr := w.etcdClientOf(t, via)
	resp, err := cl.Get("https://" + addr + ":2379/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Server
}

// etcdMembersVia lists etcd's members by name, asking the etcd of the
// controller called via with the API server's etcd client certificate.
func (w *typhoonLab) etcdMembersVia(t *testing.T, via string) []string {
	t.Helper()
	cl, addr := w.etcdClientOf(t, via)
	resp, err := cl.Post("https://"+addr+":2379/v3/cluster/member/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range out.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// typhoonComponents are the workloads of Typhoon's default components in
// kube-system, and the label their pods carry.
var typhoonComponents = []struct{ kind, name, podLabel string }{
	{"daemonset", "cilium", "k8s-app=cilium-agent"},
	{"deployment", "cilium-operator", "name=cilium-operator"},
	{"deployment", "coredns", "k8s-app=coredns"},
}

// componentsPending lists Typhoon's components not rolled out yet (every
// pod of the newest template scheduled and available), and with
// restarted those a kube.restart-workloads has not marked.
func componentsPending(ctx context.Context, cs kubernetes.Interface, restarted bool) []string {
	var pending []string
	for _, c := range typhoonComponents {
		var gen, observed int64
		var want, updated, available int32
		var ann map[string]string
		switch c.kind {
		case "daemonset":
			d, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				pending = append(pending, c.name+": "+err.Error())
				continue
			}
			gen, observed, ann = d.Generation, d.Status.ObservedGeneration, d.Spec.Template.Annotations
			want, updated, available = d.Status.DesiredNumberScheduled, d.Status.UpdatedNumberScheduled, d.Status.NumberAvailable
		default:
			d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				pending = append(pending, c.name+": "+err.Error())
				continue
			}
			gen, observed, ann = d.Generation, d.Status.ObservedGeneration, d.Spec.Template.Annotations
			want, updated, available = *d.Spec.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas
			if d.Status.Replicas != want {
				updated = min(updated, want-1) // old pods still there
			}
		}
		switch {
		case restarted && ann["kedge.dev/restart"] == "":
			pending = append(pending, fmt.Sprintf("%s/%s: not restarted", c.kind, c.name))
		case want == 0 || observed < gen || updated != want || available != want:
			pending = append(pending, fmt.Sprintf("%s/%s: %d of %d updated, %d available", c.kind, c.name, updated, want, available))
		}
	}
	return pending
}

// componentPods are the UIDs of the components' pods that run.
func componentPods(ctx context.Context, t *testing.T, cs kubernetes.Interface) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, c := range typhoonComponents {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: c.podLabel})
		if err != nil {
			t.Fatalf("%s's pods: %v", c.name, err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out[c.name] = append(out[c.name], string(p.UID))
			}
		}
	}
	return out
}

// checkNodeBootID checks that the kubelet reports the boot it runs in, as
// the real one does: the rebooted host's new boot ID, not before's.
func checkNodeBootID(t *testing.T, cs kubernetes.Interface, h *testhosts.Host, node, before string) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	if after, _ := h.BootID(); n.Status.NodeInfo.BootID != after || after == before || after == "" {
		t.Errorf("%s's Node bootID %q after its reboot; the host's boot ID %q, before %q", node, n.Status.NodeInfo.BootID, after, before)
	}
}
