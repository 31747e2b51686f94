package layout

import (
	"errors"
	"strings"
	"testing"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/typhoon"

	"kedge.dev/kedge/actions/render"
)

// nnHost is a host's files for the Node name tests.
type nnHost = memHost

// running is what systemctl show reports for a unit of the host, with its
// drop-ins, enabled and running.
func (m nnHost) running(fragment string, dropIns ...string) UnitState {
	files := append([]string{fragment}, dropIns...)
	var contents [][]byte
	for _, p := range files {
		contents = append(contents, m[p])
	}
	u, _ := ParseUnit(files, contents)
	s := UnitState{LoadState: "loaded", ActiveState: "active", UnitFileState: "enabled", FragmentPath: fragment, DropInPaths: dropIns}
	for k, v := range u.Environment {
		s.Environment = append(s.Environment, k+"="+v)
	}
	return s
}

// kedgeHost is a host laid out as Kedge's node-join leaves it, its kubelet
// registering as node (--hostname-override), the host itself named
// hostname.
func kedgeHost(t *testing.T, node, hostname string) (nnHost, Facts) {
	t.Helper()
	m := nnHost{}
	u, err := nodefiles.KubeletUnit(render.KubeletUnitInput{Runtime: nodefiles.RuntimeDocker, Image: "quay.io/poseidon/kubelet:v1.35.4",
		Node: node, Role: nodefiles.RoleWorker, NodeIP: "10.0.0.21"})
	if err != nil {
		t.Fatal(err)
	}
	m[nodefiles.KubeletUnitPath] = u
	cfg, err := nodefiles.KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		t.Fatal(err)
	}
	m[nodefiles.KubeletConfigPath] = cfg
	return m, Facts{Hostname: hostname, Units: map[string]UnitState{KubeletService: m.running(nodefiles.KubeletUnitPath)}}
}

// The kubelet's name and where it was read: --hostname-override in the
// unit file whose command line runs the kubelet (a drop-in that replaces
// ExecStart included), else the host's name.
func TestNodeNameIsReadWhereTheKubeletGetsIt(t *testing.T) {
	m, f := kedgeHost(t, "worker-1.mercury.example", "worker-1")
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	if l.NodeName != "worker-1.mercury.example" || l.NodeNameFrom != "--hostname-override in "+nodefiles.KubeletUnitPath {
		t.Errorf("Kedge's unit: %q from %q", l.NodeName, l.NodeNameFrom)
	}

	// A drop-in that replaces ExecStart is where the name comes from.
	const dropIn = "/etc/systemd/system/kubelet.service.d/20-name.conf"
	run := strings.ReplaceAll(strings.Split(strings.Split(string(m[nodefiles.KubeletUnitPath]), "ExecStart=")[1], "\nExecStop")[0], "worker-1.mercury.example", "W1.Mercury.Example")
	m[dropIn] = []byte("[Service]\nExecStart=\nExecStart=" + run + "\n")
	f.Units[KubeletService] = m.running(nodefiles.KubeletUnitPath, dropIn)
	if l, err = Discover(f, m); err != nil {
		t.Fatal(err)
	}
	if l.NodeName != "w1.mercury.example" || l.NodeNameFrom != "--hostname-override in "+dropIn || l.Kubelet.RunFrom != dropIn {
		t.Errorf("with %s: %q from %q (run from %q)", dropIn, l.NodeName, l.NodeNameFrom, l.Kubelet.RunFrom)
	}

	// No --hostname-override: the host's name, lower-cased as the
	// kubelet does.
	delete(m, dropIn)
	m[nodefiles.KubeletUnitPath] = []byte(strings.Replace(string(m[nodefiles.KubeletUnitPath]), "--hostname-override=worker-1.mercury.example", "", 1))
	f.Units[KubeletService] = m.running(nodefiles.KubeletUnitPath)
	f.Hostname = "Worker-1"
	if l, err = Discover(f, m); err != nil {
		t.Fatal(err)
	}
	if l.NodeName != "worker-1" || !strings.Contains(l.NodeNameFrom, "host name") || !strings.Contains(l.NodeNameFrom, "no --hostname-override") {
		t.Errorf("without --hostname-override: %q from %q", l.NodeName, l.NodeNameFrom)
	}

}

// The Node name rule: the inventory's nodeName (else its name) must be the
// kubelet's; a host with no kubelet yet has nothing to compare.
func TestCheckNodeName(t *testing.T) {
	m, f := kedgeHost(t, "tyc1.typhoon.test", "tyc1")
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, host, nodeName string
		want                 []string // in the refusal; none: accepted
	}{
		{"matching nodeName", "tyc1", "tyc1.typhoon.test", nil},
		{"no nodeName", "tyc1", "tyc1", []string{
			`tyc1: its kubelet registers the Node as "tyc1.typhoon.test" (--hostname-override in /etc/systemd/system/kubelet.service)`,
			`the inventory names it "tyc1" and sets no other nodeName`, `would look for Node "tyc1"`,
			"set `nodeName: tyc1.typhoon.test` for tyc1 in the inventory"}},
		{"another nodeName", "tyc1", "tyc1.other.test", []string{
			`the inventory sets nodeName "tyc1.other.test" for it`, `would look for Node "tyc1.other.test"`,
			"set `nodeName: tyc1.typhoon.test` for tyc1 in the inventory (or, if \"tyc1.other.test\" is right, the kubelet's --hostname-override)"}},
		{"case differs", "tyc1", "TYC1.typhoon.test", []string{`sets nodeName "TYC1.typhoon.test"`}},
		{"nothing asked", "tyc1", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := l.CheckNodeName(c.host, c.nodeName)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ne *NodeNameError
			if !errors.As(err, &ne) || ne.Host != c.host || ne.Inventory != c.nodeName || ne.Kubelet != "tyc1.typhoon.test" {
				t.Fatalf("got %#v, want a NodeNameError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal lacks %q:\n%s", w, err)
				}
			}
		})
	}

	// The whole text, as an operator reads it.
	want := `tyc1: its kubelet registers the Node as "tyc1.typhoon.test" (--hostname-override in /etc/systemd/system/kubelet.service), ` +
		`but the inventory names it "tyc1" and sets no other nodeName: Kedge's Node actions (cordon, drain, wait, delete) would look for Node "tyc1", ` +
		"not this host's. Refused; set `nodeName: tyc1.typhoon.test` for tyc1 in the inventory"
	if got := l.CheckNodeName("tyc1", "tyc1").Error(); got != want {
		t.Errorf("refusal\n got %s\nwant %s", got, want)
	}

	// A bare host has no kubelet to register anything: node-join sets it
	// up under the inventory's name.
	bare, err := Discover(Facts{Hostname: "tyw9", Units: map[string]UnitState{KubeletService: {LoadState: "not-found"}}}, nnHost{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.CheckNodeName("tyw9", "tyw9.typhoon.test"); err != nil {
		t.Errorf("a bare host: %v", err)
	}
}

// A live kubelet runs, is starting, or starts again by itself (at boot,
// or through kubelet.path); node-remove stops none whose Node it did not
// drain.
func TestKubeletLive(t *testing.T) {
	path := func(active, enabled string) UnitState {
		return UnitState{LoadState: "loaded", ActiveState: active, UnitFileState: enabled}
	}
	cases := []struct {
		name   string
		ks, ps UnitState
		want   bool
	}{
		{"running", UnitState{ActiveState: "active", UnitFileState: "enabled"}, UnitState{LoadState: "not-found"}, true},
		{"running, not enabled", UnitState{ActiveState: "active", UnitFileState: "disabled"}, UnitState{LoadState: "not-found"}, true},
		{"restarting after a crash", UnitState{ActiveState: "activating", UnitFileState: "disabled"}, UnitState{LoadState: "not-found"}, true},
		{"stopped, enabled", UnitState{ActiveState: "inactive", UnitFileState: "enabled"}, UnitState{LoadState: "not-found"}, true},
		{"stopped and disabled", UnitState{ActiveState: "failed", UnitFileState: "disabled"}, UnitState{LoadState: "not-found"}, false},
		{"kubelet.path waiting", UnitState{ActiveState: "inactive", UnitFileState: "disabled"}, path("active", "disabled"), true},
		{"kubelet.path enabled", UnitState{ActiveState: "inactive", UnitFileState: "disabled"}, path("inactive", "enabled"), true},
		{"removed (both stopped and disabled)", UnitState{ActiveState: "inactive", UnitFileState: "disabled"}, path("inactive", "disabled"), false},
	}
	for _, c := range cases {
		if got := live(c.ks, c.ps); got != c.want {
			t.Errorf("%s: live = %v, want %v", c.name, got, c.want)
		}
	}
}

// etcd's data directory, on the host, from a static pod's --data-dir
// through its hostPath volume (etcd-member.service's: below, on Typhoon's
// own hosts).
func TestEtcdDataDir(t *testing.T) {
	m, f := kedgeHost(t, "controller-1", "controller-1")
	pods, err := nodefiles.StaticPods(render.ControlPlaneInput{Node: "controller-1", NodeIP: "10.0.0.11", ServiceCIDR: "10.96.0.0/12",
		Images: render.ControlPlaneImages{Etcd: "e:1", APIServer: "a:1", ControllerManager: "c:1", Scheduler: "s:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range pods {
		m[nodefiles.ManifestsDir+"/"+name] = b
	}
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	if l.Etcd.Mode != EtcdStaticPod || l.Etcd.DataDir != nodefiles.EtcdDataDir || l.Role != "controller" {
		t.Errorf("etcd static pod: %+v, role %q", l.Etcd, l.Role)
	}
}

// On the hosts Typhoon's own templates render, both flavours: the Node
// name is the machine's domain, from kubelet.service; the etcd member's
// name is the short one an inventory would use; an inventory naming the
// host by it without nodeName is refused, one with the domain as nodeName
// is not. etcd's data lives in /var/lib/etcd.
func TestNodeNameOnTyphoonsOwnHosts(t *testing.T) {
	for _, flavor := range []string{typhoon.Flatcar, typhoon.FCOS} {
		t.Run(flavor, func(t *testing.T) {
			m, f := typhoonController(t, flavor)
			l, err := Discover(f, m)
			if err != nil {
				t.Fatal(err)
			}
			if l.NodeName != "node1.mercury.example" || l.NodeNameFrom != "--hostname-override in "+typhoon.KubeletUnit || l.Etcd.Name != "node1" {
				t.Fatalf("%s: Node %q from %q, etcd member %q", l.Kind, l.NodeName, l.NodeNameFrom, l.Etcd.Name)
			}
			err = l.CheckNodeName("node1", "node1")
			if err == nil || !strings.Contains(err.Error(), `its kubelet registers the Node as "node1.mercury.example" (--hostname-override in /etc/systemd/system/kubelet.service)`) ||
				!strings.Contains(err.Error(), "set `nodeName: node1.mercury.example` for node1 in the inventory") {
				t.Errorf("short name without nodeName: %v", err)
			}
			if err := l.CheckNodeName("node1", "node1.mercury.example"); err != nil {
				t.Errorf("nodeName set: %v", err)
			}
			if l.Etcd.DataDir != "/var/lib/etcd" {
				t.Errorf("etcd data dir %q", l.Etcd.DataDir)
			}
		})
	}
}
