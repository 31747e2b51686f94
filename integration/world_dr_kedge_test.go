package integration

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/integration/testhosts"
)

// kedgeHA is a cluster of Kedge's own layout the bootstrap runbook built
// for one disaster-recovery test: three controllers (etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler as static pods, the real
// binaries; kubernetes.controlPlaneListen: node, so that the three share
// the machine's network, each on its own address), one worker, and a
// spare bare host that is not in the inventory.
type kedgeHA struct {
	cluster     string
	lab         *testhosts.Lab
	inventory   string
	kubeconfig  string
	client      kubernetes.Interface
	controllers []*testhosts.Host
	worker      *testhosts.Host
	spare       *testhosts.Host
	// handOn: the test using the world leaves it whole; if it passes, the
	// lane's next test gets it instead of building one.
	handOn bool
}

// kedgeHABuilt counts the worlds built: each has a cluster name of its
// own (its node workflows, its CAs in Vault).
var kedgeHABuilt atomic.Int32

// kedgeHANext is the world a test that passed left whole (handOn) for
// the lane's next test: a world is ~35 s and ~30 CPU seconds to build
// (three API servers' and etcd members' first starts).
var kedgeHANext nextWorld[kedgeHA]

// kedgeHAWorld returns a kedgeHA world for the calling test alone: the
// one the lane's last test handed on (checked whole first), or one
// bootstrapped now. Its hosts (and everything they run) stop when the
// test ends, failed or not, unless the test hands the world on and
// passes. Its addresses are kedgeHALane's.
func kedgeHAWorld(t *testing.T) *kedgeHA {
	t.Helper()
	if w := kedgeHANext.take(); w != nil {
		t.Cleanup(func() { w.release(t) })
		t.Logf("%s: handed on by the lane's last test", w.cluster)
		w.check(t)
		if t.Failed() {
			t.FailNow()
		}
		return w
	}
	n := kedgeHABuilt.Add(1)
	w := &kedgeHA{cluster: fmt.Sprintf("kedge-ha-%d", n)}
	spec := kedgeLabSpec{cluster: w.cluster, dir: w.cluster, baseIP: "127.0.61.",
		controllers: []string{"kha-1", "kha-2", "kha-3"}, workers: []string{"kha-4"}, spares: []string{"kha-5"},
		kubernetes: "  controlPlaneListen: node\n"}
	l, inv := kedgeLab(t, spec, func(l *testhosts.Lab) {
		w.lab = l
		t.Cleanup(func() { w.release(t) })
	})
	w.lab, w.inventory = l, inv
	for _, name := range spec.controllers {
		w.controllers = append(w.controllers, hostIn(l, name))
	}
	w.worker, w.spare = hostIn(l, "kha-4"), hostIn(l, "kha-5")

	began := time.Now()
	p, code, errOut := runWaitInv(t, "bootstrap", inv, "--set", "apiServerTimeout=4m")
	if code != 0 {
		for _, h := range l.Hosts {
			log, _ := h.ReadFile("/var/log/units/kubelet.service.log")
			t.Logf("%s kubelet log tail:\n%s", h.Name, tail(string(log), 3000))
		}
		t.Fatalf("bootstrap of %s: exit %d: %s\n%+v", w.cluster, code, errOut, p)
	}
	t.Logf("bootstrap of %s (3 controllers + 1 worker, listeners on the nodes' addresses): %s", w.cluster, time.Since(began).Round(time.Second))
	w.kubeconfig = filepath.Join(filepath.Dir(inv), "admin.conf")
	w.client = kubeClient(t, w.kubeconfig)
	w.check(t)
	return w
}

// release ends t's use of the world: handed on to the lane's next test
// when t asked for that and passed, its hosts stopped otherwise. A world
// handed on that no test takes stops at the package's end.
func (w *kedgeHA) release(t *testing.T) {
	if !w.handOn || t.Failed() {
		_ = w.lab.Close()
		return
	}
	w.handOn = false
	kedgeHANext.give(w, func() { _ = w.lab.Close() })
}

// controllerInventory writes the world's inventory with the spare listed
// as a controller (name, address and port): in the place of the
// controller replace names, else after the others. It returns its path.
func (w *kedgeHA) controllerInventory(t *testing.T, replace string) string {
	t.Helper()
	inv := string(must(os.ReadFile(w.inventory)))
	spare := fmt.Sprintf("  - name: %s\n    address: %s\n    port: %d\n", w.spare.Name, w.spare.Address, w.spare.Port)
	at := "workers:\n"
	if replace != "" {
		at = fmt.Sprintf("  - name: %s\n    address: %s\n", replace, hostIn(w.lab, replace).Address)
	}
	if !strings.Contains(inv, at) {
		t.Fatalf("no %q in %s", at, w.inventory)
	}
	if replace == "" {
		spare += at
	}
	inv = strings.Replace(inv, at, spare, 1)
	path := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(path, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// etcdMember is a member as etcd's API lists it.
type etcdMember struct {
	ID         string   `json:"ID"` // a uint64, as JSON gives it
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// etcd posts body to etcd's JSON gateway at path on the controller via,
// as the API server does (its etcd client certificate), and decodes the
// answer into out.
func (w *kedgeHA) etcd(t *testing.T, via *testhosts.Host, path string, body, out any) error {
	t.Helper()
	pki := "/etc/kubernetes/pki/"
	pair, err := tls.X509KeyPair(must(via.ReadFile(pki+"apiserver-etcd-client.crt")), must(via.ReadFile(pki+"apiserver-etcd-client.key")))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(must(via.ReadFile(pki + "etcd/ca.crt")))
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	resp, err := cl.Post("https://"+via.Address+":2379"+path, "application/json", strings.NewReader(string(must(json.Marshal(body)))))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("etcd %s via %s: %s: %s", path, via.Name, resp.Status, e.Message)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// members lists etcd's members, asking the controller via.
func (w *kedgeHA) members(t *testing.T, via *testhosts.Host) []etcdMember {
	t.Helper()
	var out struct{ Members []etcdMember }
	if err := w.etcd(t, via, "/v3/cluster/member/list", map[string]any{}, &out); err != nil {
		t.Fatal(err)
	}
	return out.Members
}

// memberNames are the names of etcd's members, sorted ("" for one added
// that has not started).
func memberNames(ms []etcdMember) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// loopbackListeners are the TCP sockets listening on the machine's
// 127.0.0.1 or every IPv4 address at the control plane's ports: none when
// every control plane of the machine binds its node's address alone.
func loopbackListeners(t *testing.T) []string {
	t.Helper()
	ports := map[int]string{6443: "kube-apiserver", 2379: "etcd", 2380: "etcd peer", 2381: "etcd metrics",
		10257: "kube-controller-manager", 10259: "kube-scheduler"}
	f := must(os.Open("/proc/net/tcp"))
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "0A" { // LISTEN
			continue
		}
		addr, portHex, ok := strings.Cut(fields[1], ":")
		port, err := strconv.ParseInt(portHex, 16, 32)
		if !ok || err != nil {
			continue
		}
		if what, ours := ports[int(port)]; ours && (addr == "0100007F" || addr == "00000000") {
			out = append(out, fmt.Sprintf("%s (%s:%d)", what, map[string]string{"0100007F": "127.0.0.1", "00000000": "0.0.0.0"}[addr], port))
		}
	}
	return out
}

// check checks a world before its test breaks it: three healthy etcd
// members named for the controllers, every Node Ready, no control-plane
// listener on loopback or every address, the spare bare and reachable,
// the inventories with the spare, the admin kubeconfig. (Each DR test
// checks its world: no test builds one only to check it.)
func (w *kedgeHA) check(t *testing.T) {
	t.Helper()
	if got := memberNames(w.members(t, w.controllers[0])); !slices.Equal(got, []string{"kha-1", "kha-2", "kha-3"}) {
		t.Errorf("etcd members: %v", got)
	}
	checkNodesReady(t, w.client, "kha-1", "kha-2", "kha-3", "kha-4")
	if l := loopbackListeners(t); len(l) > 0 {
		t.Errorf("listening on loopback or every address: %v", l)
	}
	if out, err := w.spare.Exec(t.Context(), "sh", "-c", "test ! -e /etc/kubernetes && echo bare"); err != nil || string(out) != "bare\n" {
		t.Errorf("%s is not bare: %q (%v)", w.spare.Name, out, err)
	}
	inv := string(must(os.ReadFile(w.controllerInventory(t, "kha-3"))))
	if !strings.Contains(inv, "  - name: kha-5\n    address: 127.0.61.5\n    port: 22\nworkers:\n") || strings.Contains(inv, "kha-3") {
		t.Errorf("the inventory with the spare for kha-3:\n%s", inv)
	}
	inv = string(must(os.ReadFile(w.controllerInventory(t, ""))))
	if !strings.Contains(inv, "address: 127.0.61.3\n  - name: kha-5\n    address: 127.0.61.5\n    port: 22\nworkers:\n") {
		t.Errorf("the inventory with the spare added:\n%s", inv)
	}
	cfg := must(clientcmd.LoadFromFile(w.kubeconfig))
	for _, c := range cfg.Clusters {
		if c.Server != "https://127.0.61.1:6443" {
			t.Errorf("admin kubeconfig server %s", c.Server)
		}
	}
}

// checkNodesReady fails the test unless every Node named is Ready.
func checkNodesReady(t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		ready[n.Name] = nodeIsReady(&n)
	}
	for _, name := range names {
		if !ready[name] {
			t.Errorf("node %s not Ready (nodes: %v)", name, ready)
		}
	}
}
