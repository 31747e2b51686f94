package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/integration/typhoon/butane"

	"kedge.dev/kedge/actions/render"
)

// memHost is a host's files in memory, for unit tests.
type memHost map[string][]byte

func (m memHost) ReadFile(p string) ([]byte, error) {
	if b, ok := m[p]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
}

func (m memHost) ReadDir(dir string) ([]string, error) {
	var names []string
	for p := range m {
		if path.Dir(p) == dir {
			names = append(names, path.Base(p))
		}
	}
	if names == nil {
		return nil, fmt.Errorf("open %s: %w", dir, fs.ErrNotExist)
	}
	return names, nil
}

// add writes files rendered by typhoonFiles or staticPods (which only
// fail on a flavor they do not know).
func (m memHost) add(files map[string][]byte, err error) {
	if err != nil {
		panic(err)
	}
	for p, d := range files {
		m[p] = d
	}
}

// mercury is a Typhoon cluster's three controllers.
var mercury = []typhoon.Host{
	{Name: "node1", Domain: "node1.mercury.example", Flavor: typhoon.Flatcar, Controller: true},
	{Name: "node2", Domain: "node2.mercury.example", Flavor: typhoon.Flatcar, Controller: true},
	{Name: "node3", Domain: "node3.mercury.example", Flavor: typhoon.Flatcar, Controller: true},
}

// typhoonFiles are the files Typhoon v1.35.4's own template for h's
// flavour and role puts on it (Ignition's regular files), in the cluster
// of mercury's controllers.
func typhoonFiles(h typhoon.Host) (map[string][]byte, error) {
	text, err := typhoon.Butane(h, mercury, "ssh-ed25519 AAAA")
	if err != nil {
		return nil, err
	}
	cfg, err := butane.Parse(h.Name, []byte(text))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, f := range cfg.Files {
		if !f.Dir && f.Link == "" {
			files[f.Path] = f.Data
		}
	}
	return files, nil
}

// staticPods are terraform-render-bootstrap's static pods for mercury, as
// the layout script puts them in /etc/kubernetes/manifests, and the
// admin kubeconfig it puts beside the PKI.
func staticPods() (map[string][]byte, error) {
	p, err := typhoon.NewPKI(typhoon.Cluster{Name: "mercury", APIServer: "mercury.example", EtcdServers: []string{mercury[0].Domain}})
	if err != nil {
		return nil, err
	}
	assets, err := p.Assets()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for name, data := range assets {
		if rest, ok := strings.CutPrefix(name, "static-manifests/"); ok {
			files[typhoon.ManifestsDir+"/"+rest] = data
		}
		if name == "auth/admin.conf" {
			files[typhoon.AdminK] = data
		}
	}
	return files, nil
}

// loaded is what systemctl show reports for a unit file on the host,
// with its drop-ins, enabled and running.
func loaded(m memHost, fragment string, dropIns ...string) UnitState {
	s := UnitState{LoadState: "loaded", ActiveState: "active", UnitFileState: "enabled", FragmentPath: fragment, DropInPaths: dropIns}
	u, _ := ParseUnit(append([]string{fragment}, dropIns...), func() [][]byte {
		var c [][]byte
		for _, p := range append([]string{fragment}, dropIns...) {
			c = append(c, m[p])
		}
		return c
	}())
	for k, v := range u.Environment {
		s.Environment = append(s.Environment, k+"="+v)
	}
	return s
}

const tlsKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: default-cluster
  cluster:
    certificate-authority: /etc/kubernetes/ca.crt
    server: https://mercury.example:6443
users:
- name: default-auth
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem
contexts:
- name: default-context
  context: {cluster: default-cluster, user: default-auth}
current-context: default-context
`

func typhoonController(t *testing.T, flavor string) (memHost, Facts) {
	m := memHost{}
	h := mercury[0]
	h.Flavor = flavor
	m.add(typhoonFiles(h))
	m.add(staticPods())
	m[typhoon.KubeletKubeconfig] = []byte(tlsKubeconfig)
	f := Facts{Hostname: "node1.mercury.example", Units: map[string]UnitState{
		KubeletService: loaded(m, typhoon.KubeletUnit),
		KubeletPath:    loaded(m, typhoon.KubeletPathUnit),
		EtcdMember:     loaded(m, typhoon.EtcdUnit),
	}}
	return m, f
}

func TestDiscoverTyphoonFlatcarController(t *testing.T) {
	m, f := typhoonController(t, typhoon.Flatcar)
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind != KindTyphoonFlatcar || l.Role != "controller" || l.NodeName != "node1.mercury.example" {
		t.Fatalf("kind %q role %q node %q (%s)", l.Kind, l.Role, l.NodeName, l.Why)
	}
	k := l.Kubelet
	if k.Runtime != "docker" || k.Image != "quay.io/poseidon/kubelet:v1.35.4" || k.ImageFrom != typhoon.KubeletUnit || k.ImageInEffect != k.Image {
		t.Errorf("kubelet runtime %q image %q from %q in effect %q", k.Runtime, k.Image, k.ImageFrom, k.ImageInEffect)
	}
	if k.PathExists != "/etc/kubernetes/kubeconfig" || k.PathEnabled != "enabled" {
		t.Errorf("kubelet.path: PathExists %q, %q", k.PathExists, k.PathEnabled)
	}
	if k.BootstrapKubeconfig != "/etc/kubernetes/kubeconfig" || k.Kubeconfig != "/var/lib/kubelet/kubeconfig" ||
		k.ClientCertificate != "/var/lib/kubelet/pki/kubelet-client-current.pem" || k.ClientCAFile != "/etc/kubernetes/ca.crt" {
		t.Errorf("kubelet files: %+v", k)
	}
	if !reflect.DeepEqual(l.ClusterDNS, []string{"10.3.0.10"}) || l.ClusterDomain != "cluster.local" {
		t.Errorf("cluster DNS %q domain %q", l.ClusterDNS, l.ClusterDomain)
	}
	if !slices.Contains(k.Args, "--register-with-taints=node-role.kubernetes.io/controller=:NoSchedule") ||
		!slices.Contains(k.Args, "--node-labels=node.kubernetes.io/controller=true") {
		t.Errorf("kubelet args %q", k.Args)
	}
	e := l.Etcd
	if e.Mode != EtcdHostUnit || e.Unit != EtcdMember || e.Name != "node1" || e.EnvFile != "/etc/etcd/etcd.env" || len(e.InitialCluster) != 3 ||
		e.InitialCluster[2] != (Member{Name: "node3", PeerURL: "https://node3.mercury.example:2380"}) ||
		!reflect.DeepEqual(e.ClientURLs, []string{"https://node1.mercury.example:2379"}) {
		t.Errorf("etcd %+v", e)
	}
	// Typhoon's unit runs ${ETCD_IMAGE}, set in the unit itself: an etcd
	// upgrade writes Kedge's drop-in.
	if e.Image != "quay.io/coreos/etcd:v3.5.13" || e.ImageFrom != typhoon.EtcdUnit || e.Runtime != "docker" || e.ImageInEffect != e.Image ||
		e.ImageDropIn != EtcdImageDropIn || e.ImageDropInName != "10-image.conf" || e.ImageDropInRefused != "" {
		t.Errorf("etcd image %q from %q in effect %q, drop-in %q (%q) refused %q", e.Image, e.ImageFrom, e.ImageInEffect, e.ImageDropIn, e.ImageDropInName, e.ImageDropInRefused)
	}
	want := map[string]string{
		FileClusterCA: "/etc/kubernetes/pki/ca.crt", FileClusterCAKey: "/etc/kubernetes/pki/ca.key",
		FileAPIServerCert: "/etc/kubernetes/pki/apiserver.crt", FileAPIServerKey: "/etc/kubernetes/pki/apiserver.key",
		FileServiceAccountK: "/etc/kubernetes/pki/service-account.key", FileServiceAccountP: "/etc/kubernetes/pki/service-account.pub",
		FileEtcdClientCA: "/etc/kubernetes/pki/etcd-client-ca.crt", FileEtcdClientCert: "/etc/kubernetes/pki/etcd-client.crt",
		FileEtcdClientKey: "/etc/kubernetes/pki/etcd-client.key",
		FileEtcdServerCA:  "/etc/ssl/etcd/etcd/server-ca.crt", FileEtcdServerCert: "/etc/ssl/etcd/etcd/server.crt", FileEtcdServerKey: "/etc/ssl/etcd/etcd/server.key",
		FileEtcdPeerCA: "/etc/ssl/etcd/etcd/peer-ca.crt", FileEtcdPeerCert: "/etc/ssl/etcd/etcd/peer.crt", FileEtcdPeerKey: "/etc/ssl/etcd/etcd/peer.key",
		FileKubeletClientCA: "/etc/kubernetes/ca.crt", FileKubeletConfig: "/etc/kubernetes/kubelet.yaml",
		FileKubeletKubecfg: "/var/lib/kubelet/kubeconfig", FileBootstrapKubecfg: "/etc/kubernetes/kubeconfig",
		// The kubelet's serving certificate, in its default --cert-dir.
		FileKubeletServingCert: "/var/lib/kubelet/pki/kubelet.crt", FileKubeletServingKey: "/var/lib/kubelet/pki/kubelet.key",
		FileKubeletClientCurrent: "/var/lib/kubelet/pki/kubelet-client-current.pem",
		// The API server's kubelet client certificate is its serving one.
		FileAPIServerKubeletCert: "/etc/kubernetes/pki/apiserver.crt", FileAPIServerKubeletKey: "/etc/kubernetes/pki/apiserver.key",
		FileControllerManagerKC: "/etc/kubernetes/pki/controller-manager.conf", FileSchedulerKC: "/etc/kubernetes/pki/scheduler.conf",
		// The front-proxy CA and client, and admin.conf (issue 19).
		FileAggregationCA: "/etc/kubernetes/pki/aggregation-ca.crt", FileAggregationCert: "/etc/kubernetes/pki/aggregation-client.crt",
		FileAggregationKey: "/etc/kubernetes/pki/aggregation-client.key", FileAdminKC: "/etc/kubernetes/pki/admin.conf",
		// The controller manager's signer, root CA and client CA: all
		// ca.crt (issue 21).
		FileClusterSigner: "/etc/kubernetes/pki/ca.crt", FileRootCA: "/etc/kubernetes/pki/ca.crt",
		FileControllerManagerCA: "/etc/kubernetes/pki/ca.crt",
	}
	if !reflect.DeepEqual(l.Files, want) {
		t.Errorf("files\n got %v\nwant %v", l.Files, want)
	}
	if l.StaticPods["kube-apiserver"] != "/etc/kubernetes/manifests/kube-apiserver.yaml" || len(l.StaticPods) != 3 {
		t.Errorf("static pods %v", l.StaticPods)
	}
	if err := l.Require("node1", KindKedge, KindTyphoonFlatcar); err != nil {
		t.Error(err)
	}
}

func TestDiscoverTyphoonFCOSWorkerWithADropIn(t *testing.T) {
	m := memHost{}
	m.add(typhoonFiles(typhoon.Host{Name: "node4", Domain: "Node4.mercury.example", Flavor: typhoon.FCOS}))
	dropIn := "/etc/systemd/system/kubelet.service.d/10-image.conf"
	m[dropIn] = []byte("[Service]\nEnvironment=KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.36.2-amd64\n")
	ks := loaded(m, typhoon.KubeletUnit, dropIn)
	// The drop-in was written but systemd was not reloaded: the loaded
	// unit still has the old image.
	ks.Environment = []string{"KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.35.4"}
	f := Facts{Hostname: "node4", Units: map[string]UnitState{KubeletService: ks, KubeletPath: loaded(m, typhoon.KubeletPathUnit),
		EtcdMember: {LoadState: "not-found", ActiveState: "inactive"}}}
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind != KindTyphoonFCOS || l.Role != "worker" || l.NodeName != "node4.mercury.example" || l.Etcd.Mode != EtcdNone {
		t.Fatalf("kind %q role %q node %q etcd %q (%s)", l.Kind, l.Role, l.NodeName, l.Etcd.Mode, l.Why)
	}
	k := l.Kubelet
	if k.Runtime != "podman" || k.Image != "quay.io/poseidon/kubelet:v1.36.2-amd64" || k.ImageFrom != dropIn ||
		k.ImageInEffect != "quay.io/poseidon/kubelet:v1.35.4" {
		t.Errorf("kubelet runtime %q image %q from %q in effect %q", k.Runtime, k.Image, k.ImageFrom, k.ImageInEffect)
	}
	if !reflect.DeepEqual(k.Unit.Files, []string{typhoon.KubeletUnit, dropIn}) {
		t.Errorf("unit files %q", k.Unit.Files)
	}
	if k.ClientCertificate != "" {
		t.Errorf("client certificate %q before the TLS bootstrap", k.ClientCertificate)
	}
	if k.ImageOverriddenBy != "" {
		t.Errorf("Kedge's own drop-in reported as overriding: %q", k.ImageOverriddenBy)
	}

	// A drop-in after Kedge's that sets the image wins over a swap; one
	// before it does not.
	for name, want := range map[string]string{"20-pin.conf": "/etc/systemd/system/kubelet.service.d/20-pin.conf", "05-old.conf": ""} {
		extra := "/etc/systemd/system/kubelet.service.d/" + name
		m[extra] = []byte("[Service]\nEnvironment=KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.30.0\n")
		files := []string{dropIn, extra}
		if name < "10" {
			files = []string{extra, dropIn}
		}
		f.Units[KubeletService] = loaded(m, typhoon.KubeletUnit, files...)
		l, err := Discover(f, m)
		if err != nil {
			t.Fatal(err)
		}
		if l.Kubelet.ImageOverriddenBy != want {
			t.Errorf("with %s: overridden by %q, want %q", name, l.Kubelet.ImageOverriddenBy, want)
		}
		delete(m, extra)
	}
}

func TestDiscoverKedge(t *testing.T) {
	m := memHost{}
	u, err := nodefiles.KubeletUnit(render.KubeletUnitInput{Runtime: nodefiles.RuntimeDocker, Image: "quay.io/poseidon/kubelet:v1.35.4",
		Node: "worker-1", Role: nodefiles.RoleWorker, NodeIP: "10.0.0.21"})
	if err != nil {
		t.Fatal(err)
	}
	m[nodefiles.KubeletUnitPath] = u
	cfg, err := nodefiles.KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		t.Fatal(err)
	}
	m[nodefiles.KubeletConfigPath] = cfg
	m[nodefiles.KubeletConfigDropInDir+"/50-dns.conf"] = []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS: [10.96.0.53]\n")
	f := Facts{Hostname: "worker-1", Units: map[string]UnitState{KubeletService: loaded(m, nodefiles.KubeletUnitPath)}}
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind != KindKedge || l.Role != "worker" || l.NodeName != "worker-1" || l.Kubelet.PathExists != "" {
		t.Fatalf("kind %q role %q node %q (%s)", l.Kind, l.Role, l.NodeName, l.Why)
	}
	if !reflect.DeepEqual(l.ClusterDNS, []string{"10.96.0.53"}) {
		t.Errorf("cluster DNS %q: the --config-dir drop-in wins", l.ClusterDNS)
	}
	if l.Kubelet.ConfigDir != nodefiles.KubeletConfigDropInDir || l.Kubelet.BootstrapKubeconfig != nodefiles.BootstrapKubeconfigPath {
		t.Errorf("kubelet %+v", l.Kubelet)
	}
	// The kubelet's serving certificate: kubelet.crt in its default
	// --cert-dir (where cert-renewal puts one), or the files a drop-in
	// names.
	if l.Files[FileKubeletServingCert] != "/var/lib/kubelet/pki/kubelet.crt" || l.Files[FileKubeletServingKey] != "/var/lib/kubelet/pki/kubelet.key" {
		t.Errorf("serving certificate %q key %q", l.Files[FileKubeletServingCert], l.Files[FileKubeletServingKey])
	}
	if l.Files[FileKubeletClientCurrent] != "/var/lib/kubelet/pki/kubelet-client-current.pem" {
		t.Errorf("client certificate store %q", l.Files[FileKubeletClientCurrent])
	}
	m[nodefiles.KubeletConfigDropInDir+"/60-tls.conf"] = []byte("tlsCertFile: /var/lib/kubelet/serving/tls.crt\ntlsPrivateKeyFile: /var/lib/kubelet/serving/tls.key\n")
	if l, err = Discover(f, m); err != nil {
		t.Fatal(err)
	}
	if l.Files[FileKubeletServingCert] != "/var/lib/kubelet/serving/tls.crt" || l.Files[FileKubeletServingKey] != "/var/lib/kubelet/serving/tls.key" {
		t.Errorf("serving certificate %q key %q with tlsCertFile", l.Files[FileKubeletServingCert], l.Files[FileKubeletServingKey])
	}
}

func TestDiscoverNoneAndUnknown(t *testing.T) {
	l, err := Discover(Facts{Hostname: "bare", Units: map[string]UnitState{KubeletService: {LoadState: "not-found"}}}, memHost{})
	if err != nil || l.Kind != KindNone || l.NodeName != "bare" {
		t.Fatalf("bare host: %+v, %v", l, err)
	}
	err = l.Require("bare", KindKedge, KindTyphoonFCOS)
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "on bare: none (no kubelet.service)") {
		t.Errorf("Require on a bare host: %v", err)
	}

	cases := map[string]struct {
		files memHost
		units func(memHost) map[string]UnitState
		why   string
	}{
		"kubeadm": {
			files: memHost{
				"/usr/lib/systemd/system/kubelet.service": []byte("[Service]\nExecStart=/usr/bin/kubelet\n"),
				"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": []byte("[Service]\nEnvironment=\"KUBELET_KUBECONFIG_ARGS=--kubeconfig=/etc/kubernetes/kubelet.conf\"\n" +
					"ExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS\n"),
			},
			units: func(m memHost) map[string]UnitState {
				return map[string]UnitState{KubeletService: loaded(m, "/usr/lib/systemd/system/kubelet.service", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf")}
			},
			why: "runs no docker or podman container from ${KUBELET_IMAGE}",
		},
		"typhoon unit without kubelet.path": {
			files: func() memHost {
				m := memHost{}
				m.add(typhoonFiles(typhoon.Host{Name: "n", Domain: "n", Flavor: typhoon.Flatcar}))
				return m
			}(),
			units: func(m memHost) map[string]UnitState {
				return map[string]UnitState{KubeletService: loaded(m, typhoon.KubeletUnit)}
			},
			why: "has no kubelet.path",
		},
		"etcd without a kubelet": {
			files: memHost{},
			units: func(memHost) map[string]UnitState {
				return map[string]UnitState{EtcdMember: {LoadState: "loaded"}}
			},
			why: "no kubelet.service",
		},
		"a run flag Kedge does not read": {
			files: memHost{"/etc/systemd/system/kubelet.service": []byte("[Service]\nEnvironment=KUBELET_IMAGE=k:v1\nExecStart=/usr/bin/podman run --gpus all ${KUBELET_IMAGE} --config=/c\n")},
			units: func(m memHost) map[string]UnitState {
				return map[string]UnitState{KubeletService: loaded(m, "/etc/systemd/system/kubelet.service")}
			},
			why: "flag --gpus is not one Kedge reads",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := Discover(Facts{Hostname: "h", Units: c.units(c.files)}, c.files)
			if err != nil {
				t.Fatal(err)
			}
			if l.Kind != KindUnknown || !strings.Contains(l.Why, c.why) {
				t.Errorf("kind %q why %q, want unknown: %q", l.Kind, l.Why, c.why)
			}
			if err := l.Require("h", KindKedge, KindTyphoonFlatcar, KindTyphoonFCOS); !errors.Is(err, ErrUnknown) {
				t.Errorf("Require: %v", err)
			}
		})
	}
}

func TestSplitWordsAndExpand(t *testing.T) {
	words, err := SplitWords(`/usr/bin/bash -c "grep 'x' /f | awk '{print $2}'" --node-labels=a="true" b\ c`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/bin/bash", "-c", "grep 'x' /f | awk '{print $2}'", "--node-labels=a=true", "b c"}
	if !reflect.DeepEqual(words, want) {
		t.Errorf("got %q want %q", words, want)
	}
	if _, err := SplitWords(`"open`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
	got, _ := Expand("${A}:${B}", map[string]string{"A": "x", "B": "y"})
	if !reflect.DeepEqual(got, []string{"x:y"}) {
		t.Errorf("Expand: %q", got)
	}
	got, _ = Expand("$ARGS", map[string]string{"ARGS": "--a  --b"})
	if !reflect.DeepEqual(got, []string{"--a", "--b"}) {
		t.Errorf("Expand $ARGS: %q", got)
	}
}

// Typhoon documents 10-image-override.conf for the kubelet image: it sorts
// before Kedge's 10-image.conf, so a swap writing 10-image.conf would
// leave the operator's file dead. A swap writes where the image is set,
// when that drop-in sets nothing else, and refuses a drop-in it cannot
// rewrite whole.
func TestASwapWritesWhereTheOperatorSetsTheImage(t *testing.T) {
	const override = "/etc/systemd/system/kubelet.service.d/10-image-override.conf"
	cases := []struct {
		name, body, target, refused string
	}{
		{"no drop-in", "", ImageDropIn, ""},
		{"typhoon's override", "[Service]\nEnvironment=KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.36.0\n", override, ""},
		{"override with a comment and quotes", "# pinned\n[Service]\nEnvironment=\"KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.36.0\"\n", override, ""},
		{"override setting more", "[Service]\nEnvironment=KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.36.0\nEnvironment=HTTP_PROXY=http://proxy:3128\n", "", "among other settings"},
		{"override with another variable on the line", "[Service]\nEnvironment=KUBELET_IMAGE=x:1 OTHER=1\n", "", "among other settings"},
		{"a drop-in that does not set the image", "[Service]\nEnvironment=HTTP_PROXY=http://proxy:3128\n", ImageDropIn, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := memHost{}
			m.add(typhoonFiles(typhoon.Host{Name: "node2", Domain: "node2.mercury.example", Flavor: typhoon.Flatcar}))
			var dropIns []string
			if c.body != "" {
				m[override] = []byte(c.body)
				dropIns = append(dropIns, override)
			}
			f := Facts{Hostname: "node2", Units: map[string]UnitState{KubeletService: loaded(m, typhoon.KubeletUnit, dropIns...),
				KubeletPath: loaded(m, typhoon.KubeletPathUnit), EtcdMember: {LoadState: "not-found", ActiveState: "inactive"}}}
			l, err := Discover(f, m)
			if err != nil {
				t.Fatal(err)
			}
			k := l.Kubelet
			if k.ImageDropIn != c.target || (c.target != "" && k.ImageDropInName != path.Base(c.target)) {
				t.Errorf("a swap writes %q (%q), want %q", k.ImageDropIn, k.ImageDropInName, c.target)
			}
			if c.refused == "" && k.ImageDropInRefused != "" || !strings.Contains(k.ImageDropInRefused, c.refused) {
				t.Errorf("refused %q, want %q", k.ImageDropInRefused, c.refused)
			}
			if c.refused != "" && !strings.Contains(k.ImageDropInRefused, override) {
				t.Errorf("the refusal does not name the file: %q", k.ImageDropInRefused)
			}
		})
	}
}

// A Kedge controller's admin.conf, beside the controller manager's
// kubeconfig where bootstrap writes both: a credential of the old CA a
// CA rotation and cert-renewal must reach, though no process names it.
func TestDiscoverKedgeAdminKubeconfig(t *testing.T) {
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
	if _, ok := l.Files[FileAdminKC]; ok {
		t.Errorf("admin.conf named before there is one: %q", l.Files[FileAdminKC])
	}
	m[nodefiles.KubernetesDir+"/admin.conf"] = []byte("apiVersion: v1\nkind: Config\n")
	if l, err = Discover(f, m); err != nil {
		t.Fatal(err)
	}
	if l.Kind != KindKedge || l.Files[FileControllerManagerKC] != nodefiles.ControllerManagerKubeconfigPath || l.Files[FileAdminKC] != nodefiles.KubernetesDir+"/admin.conf" {
		t.Errorf("kind %q, controller-manager.conf %q, admin.conf %q", l.Kind, l.Files[FileControllerManagerKC], l.Files[FileAdminKC])
	}
}

// etcd-upgrade writes ETCD_IMAGE where an operator set it in a drop-in
// of its own, else in Kedge's; it refuses a drop-in that sets more, and a
// unit whose run command names the image itself.
func TestAnEtcdUpgradeWritesWhereTheOperatorSetsTheImage(t *testing.T) {
	const override = "/etc/systemd/system/etcd-member.service.d/20-etcd-image.conf"
	cases := []struct {
		name, body, image, target, refused string
	}{
		{"no drop-in", "", "quay.io/coreos/etcd:v3.5.13", EtcdImageDropIn, ""},
		{"an operator's drop-in", "[Service]\nEnvironment=ETCD_IMAGE=mirror.example/etcd:v3.5.36\n", "mirror.example/etcd:v3.5.36", override, ""},
		{"a drop-in setting more", "[Service]\nEnvironment=ETCD_IMAGE=mirror.example/etcd:v3.5.36\nEnvironment=GOMAXPROCS=2\n", "mirror.example/etcd:v3.5.36", "", "among other settings"},
		{"a drop-in with another variable", "[Service]\nEnvironment=GOMAXPROCS=2\n", "quay.io/coreos/etcd:v3.5.13", EtcdImageDropIn, ""},
		{"a kubelet image variable alone", "[Service]\nEnvironment=KUBELET_IMAGE=x:1\n", "quay.io/coreos/etcd:v3.5.13", EtcdImageDropIn, ""},
		{"the image in the run command", "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/docker run -d --name etcd --network host --env-file /etc/etcd/etcd.env --user 232:232 --volume /etc/ssl/etcd:/etc/ssl/certs:ro --volume /var/lib/etcd:/var/lib/etcd:rw quay.io/coreos/etcd:v3.5.13\n",
			"quay.io/coreos/etcd:v3.5.13", "", "not ${ETCD_IMAGE}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, f := typhoonController(t, typhoon.Flatcar)
			if c.body != "" {
				m[override] = []byte(c.body)
				f.Units[EtcdMember] = loaded(m, typhoon.EtcdUnit, override)
			}
			l, err := Discover(f, m)
			if err != nil {
				t.Fatal(err)
			}
			e := l.Etcd
			if e.Image != c.image || e.ImageDropIn != c.target || (c.target != "" && e.ImageDropInName != path.Base(c.target)) {
				t.Errorf("image %q; an upgrade writes %q (%q), want %q, %q", e.Image, e.ImageDropIn, e.ImageDropInName, c.image, c.target)
			}
			if c.refused == "" && e.ImageDropInRefused != "" || !strings.Contains(e.ImageDropInRefused, c.refused) {
				t.Errorf("refused %q, want %q", e.ImageDropInRefused, c.refused)
			}
		})
	}
}
