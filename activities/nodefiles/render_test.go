package nodefiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/actions/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/name.golden, or rewrites the file with
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./activities/nodefiles -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (run with -update if the change is meant):\n--- got\n%s\n--- want\n%s", name, file, got, want)
	}
}

// testdata/ca.crt, client.crt and client.key are a throwaway CA and a
// client certificate it signed, made for these tests only.
func fixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestKubeletConfig(t *testing.T) {
	in := render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10", "fd00:10:96::a"}}
	got, err := KubeletConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kubelet.yaml", got)

	// The file decodes strictly into the type, to the configuration built.
	var decoded kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(got, &decoded); err != nil {
		t.Fatalf("decode strictly: %v", err)
	}
	built, err := kubeletConfiguration(in)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(built)
	b, _ := json.Marshal(&decoded)
	if !bytes.Equal(a, b) {
		t.Errorf("decoded config differs from the one built:\n%s\n%s", b, a)
	}
	if decoded.ReadOnlyPort != 0 || decoded.ServerTLSBootstrap || !decoded.RotateCertificates ||
		*decoded.Authentication.Anonymous.Enabled || !*decoded.Authentication.Webhook.Enabled ||
		decoded.CgroupDriver != "systemd" || !*decoded.FailSwapOn || decoded.ClusterDomain != "cluster.local" {
		t.Errorf("unexpected settings: %+v", decoded)
	}
	for _, want := range []string{"readOnlyPort: 0\n", "serverTLSBootstrap: false\n"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("%q is not written explicitly", want)
		}
	}

	if *decoded.ResolverConfig != "/run/systemd/resolve/resolv.conf" || decoded.ShutdownGracePeriod.Duration != 45*time.Second ||
		decoded.ShutdownGracePeriodCriticalPods.Duration != 30*time.Second || len(decoded.RegisterWithTaints) != 0 {
		t.Errorf("resolv.conf, shutdown or taints: %+v", decoded)
	}

	got, err = KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.3.0.10"}, ClusterDomain: "lab.example", CgroupDriver: "cgroupfs", FailSwapOn: ptr.To(false), ResolvConf: "/etc/resolv.conf"})
	if err != nil {
		t.Fatal(err)
	}
	decoded = kubeletv1beta1.KubeletConfiguration{}
	if err := yaml.UnmarshalStrict(got, &decoded); err != nil {
		t.Fatal(err)
	}
	if decoded.CgroupDriver != "cgroupfs" || *decoded.FailSwapOn || decoded.ClusterDomain != "lab.example" || *decoded.ResolverConfig != "/etc/resolv.conf" {
		t.Errorf("inputs not applied: %+v", decoded)
	}
}

// A node registers with its role's taints: a controller with the
// controller taint, a worker with the inventory's.
func TestKubeletConfigTaints(t *testing.T) {
	for _, c := range []struct {
		golden string
		in     render.KubeletConfigInput
		want   []corev1.Taint
	}{
		{"kubelet-controller.yaml", render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}, Role: "controller"},
			[]corev1.Taint{{Key: "node-role.kubernetes.io/controller", Effect: corev1.TaintEffectNoSchedule}}},
		{"kubelet-worker.yaml", render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}, Role: "worker", NodeTaints: []string{"role=special:NoSchedule", "dedicated:NoExecute"}},
			[]corev1.Taint{{Key: "role", Value: "special", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}}},
	} {
		got, err := KubeletConfig(c.in)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, c.golden, got)
		var decoded kubeletv1beta1.KubeletConfiguration
		if err := yaml.UnmarshalStrict(got, &decoded); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(decoded.RegisterWithTaints, c.want) {
			t.Errorf("%s: registerWithTaints %+v, want %+v", c.golden, decoded.RegisterWithTaints, c.want)
		}
	}
}

func TestBridgeCNIConfig(t *testing.T) {
	nodes := []string{"controller-1", "worker-1", "worker-2"}
	got, err := BridgeCNIConfig(render.BridgeCNIInput{PodCIDR: "10.20.0.0/14", Nodes: nodes, Node: "worker-2"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "10-kedge-bridge.conflist", got)

	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []struct {
			Type      string `json:"type"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
			IPAM      struct {
				Type   string                `json:"type"`
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	dec := json.NewDecoder(bytes.NewReader(got))
	if err := dec.Decode(&conf); err != nil {
		t.Fatal(err)
	}
	if conf.Name != "kedge-bridge" || len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || !conf.Plugins[0].IsGateway ||
		!conf.Plugins[0].IPMasq || conf.Plugins[0].IPAM.Type != "host-local" || conf.Plugins[1].Type != "portmap" {
		t.Errorf("%+v", conf)
	}
	if s := conf.Plugins[0].IPAM.Ranges[0][0]["subnet"]; s != "10.20.2.0/24" {
		t.Errorf("worker-2's subnet %s, want the third /24 of 10.20.0.0/14", s)
	}

	// Every node its own subnet; defaults; IPv6.
	for _, c := range []struct {
		in   render.BridgeCNIInput
		want string
	}{
		{render.BridgeCNIInput{Nodes: nodes, Node: "controller-1"}, "10.244.0.0/24"},
		{render.BridgeCNIInput{Nodes: nodes, Node: "worker-1"}, "10.244.1.0/24"},
		{render.BridgeCNIInput{PodCIDR: "10.244.0.0/16", NodeMaskSize: 26, Nodes: nodes, Node: "worker-2"}, "10.244.0.128/26"},
		{render.BridgeCNIInput{PodCIDR: "fd00:10:244::/56", Nodes: nodes, Node: "worker-1"}, "fd00:10:244:1::/64"},
	} {
		got, err := BridgeCNIConfig(c.in)
		if err != nil {
			t.Fatalf("%+v: %v", c.in, err)
		}
		if !bytes.Contains(got, []byte(`"subnet": "`+c.want+`"`)) {
			t.Errorf("%+v: want subnet %s in\n%s", c.in, c.want, got)
		}
	}
}

func TestKubeconfig(t *testing.T) {
	ca := fixture(t, "ca.crt")
	cases := []struct {
		golden string
		in     render.KubeconfigInput
	}{
		{"bootstrap-kubeconfig", render.KubeconfigInput{
			ClusterName: "mercury", Server: "https://10.0.0.10:6443", CACert: ca,
			User: "kubelet-bootstrap", Token: "abcdef.0123456789abcdef",
		}},
		{"scheduler.conf", render.KubeconfigInput{
			ClusterName: "mercury", Server: "https://mercury.example:6443", CACert: ca,
			User: "system:kube-scheduler", ClientCert: fixture(t, "client.crt"), ClientKey: fixture(t, "client.key"),
		}},
	}
	for _, c := range cases {
		got, err := Kubeconfig(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.golden, err)
		}
		golden(t, c.golden, got)

		cfg, err := clientcmd.Load(got)
		if err != nil {
			t.Fatalf("%s: load: %v", c.golden, err)
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		if ctx == nil || len(cfg.Contexts) != 1 {
			t.Fatalf("%s: current context %q not the one context of %v", c.golden, cfg.CurrentContext, cfg.Contexts)
		}
		cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
		if cluster == nil || user == nil {
			t.Fatalf("%s: context %+v names a missing cluster or user", c.golden, ctx)
		}
		if cluster.Server != c.in.Server || string(cluster.CertificateAuthorityData) != ca {
			t.Errorf("%s: server %q, CA %q", c.golden, cluster.Server, cluster.CertificateAuthorityData)
		}
		if user.Token != c.in.Token || string(user.ClientCertificateData) != c.in.ClientCert || string(user.ClientKeyData) != c.in.ClientKey {
			t.Errorf("%s: credentials not embedded as given: %+v", c.golden, user)
		}
		// Usable by client-go as it stands.
		rest, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
		if err != nil {
			t.Fatalf("%s: client config: %v", c.golden, err)
		}
		if rest.Host != c.in.Server {
			t.Errorf("%s: client host %q", c.golden, rest.Host)
		}
	}
}

func TestBootstrapToken(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	tok, err := NewBootstrapToken(24*time.Hour, now, "kedge join worker-1")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(tok.Token) ||
		tok.Token != tok.ID+"."+tok.TokenSecret {
		t.Errorf("token %q from id %q and secret %q", tok.Token, tok.ID, tok.TokenSecret)
	}
	if !tok.Expires.Equal(now.Add(24 * time.Hour)) {
		t.Errorf("expires %s", tok.Expires)
	}
	if s := tok.String() + fmt.Sprint(tok); strings.Contains(s, tok.TokenSecret) {
		t.Errorf("String shows the secret: %s", s)
	}
	other, err := NewBootstrapToken(time.Hour, now, "")
	if err != nil || other.Token == tok.Token {
		t.Errorf("two tokens are the same, or %v", err)
	}
	if _, err := NewBootstrapToken(0, now, ""); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("zero ttl: %v", err)
	}

	fixed, err := newBootstrapToken("abcdef", "0123456789abcdef", now.Add(72*time.Hour), "kedge join worker-1")
	if err != nil {
		t.Fatal(err)
	}
	secret := fixed.Secret()
	if secret.Name != "bootstrap-token-abcdef" || secret.Namespace != "kube-system" || secret.Type != "bootstrap.kubernetes.io/token" {
		t.Errorf("secret %s/%s of type %s", secret.Namespace, secret.Name, secret.Type)
	}
	if got := string(secret.Data["expiration"]); got != "2026-07-04T12:00:00Z" {
		t.Errorf("expiration %q", got)
	}
	got, err := toYAML(secret)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "bootstrap-token-secret.yaml", got)

	for _, bad := range [][2]string{{"ABCDEF", "0123456789abcdef"}, {"abcdef", "short"}, {"abc.ef", "0123456789abcdef"}} {
		if _, err := newBootstrapToken(bad[0], bad[1], now, ""); err == nil {
			t.Errorf("id %q secret %q accepted", bad[0], bad[1])
		}
	}
}

func TestKubeletUnit(t *testing.T) {
	cases := []struct {
		golden string
		in     render.KubeletUnitInput
	}{
		{"kubelet-worker-docker.service", render.KubeletUnitInput{
			Runtime: "docker", Image: "images.example/kubelet:v1.35.4", Node: "worker-1.mercury.example", Role: "worker", NodeIP: "10.0.0.21",
			NodeLabels: []string{"role=special", "node.kubernetes.io/pool=gpu"},
		}},
		{"kubelet-controller-podman.service", render.KubeletUnitInput{
			Runtime: "podman", Image: "images.example/kubelet@sha256:" + strings.Repeat("ab", 32), Node: "controller-1", Role: "controller",
		}},
	}
	for _, c := range cases {
		got, err := KubeletUnit(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.golden, err)
		}
		golden(t, c.golden, got)

		opts := parseUnit(t, got)
		if env := opts["Service.Environment"]; len(env) != 1 || env[0] != "KUBELET_IMAGE="+c.in.Image {
			t.Errorf("%s: Environment %q", c.golden, env)
		}
		start := opts["Service.ExecStart"]
		if len(start) != 1 {
			t.Fatalf("%s: ExecStart %q", c.golden, start)
		}
		words := strings.Fields(start[0])
		if words[0] != "/usr/bin/"+c.in.Runtime || !slices.Contains(words, "${KUBELET_IMAGE}") || !slices.Contains(words, "--hostname-override="+c.in.Node) {
			t.Errorf("%s: ExecStart %q", c.golden, words)
		}
		// The image's entrypoint is the kubelet: only flags follow it.
		for _, w := range words[slices.Index(words, "${KUBELET_IMAGE}")+1:] {
			if !strings.HasPrefix(w, "--") {
				t.Errorf("%s: %q after the image is not a flag; the kubelet refuses positional arguments", c.golden, w)
			}
		}
		roleLabel := "node.kubernetes.io/node"
		if c.in.Role == "controller" {
			roleLabel = "node.kubernetes.io/controller=true"
		}
		if got, want := flagValues(words, "--node-labels="), append([]string{roleLabel}, c.in.NodeLabels...); !slices.Equal(got, want) {
			t.Errorf("%s: --node-labels %q, want %q", c.golden, got, want)
		}
		if got := flagValues(words, "--register-with-taints="); len(got) > 0 {
			t.Errorf("%s: taints on the command line (%q): they belong in the config's registerWithTaints", c.golden, got)
		}
		for _, m := range []string{"/etc/cni/net.d:/etc/cni/net.d:ro", "/opt/cni/bin:/opt/cni/bin", "/var/lib/containerd:/var/lib/containerd",
			"/lib/modules:/lib/modules:ro", "/etc/machine-id:/etc/machine-id:ro", "/var/lib/kubelet:/var/lib/kubelet:rshared"} {
			if c.in.Runtime == "podman" && !strings.Contains(m, "modules") && !strings.Contains(m, "machine-id") && !strings.Contains(m, "containerd") {
				m += map[bool]string{true: ",z", false: ":z"}[strings.Count(m, ":") == 2]
			}
			if !slices.Contains(words, m) {
				t.Errorf("%s: no --volume %s", c.golden, m)
			}
		}
		if got := opts["Service.Restart"]; len(got) != 1 || got[0] != "always" {
			t.Errorf("%s: Restart %q", c.golden, got)
		}
		if got := opts["Install.WantedBy"]; len(got) != 1 || got[0] != "multi-user.target" {
			t.Errorf("%s: WantedBy %q", c.golden, got)
		}
	}
}

// parseUnit reads a rendered unit back: SECTION.Name → values, continued
// lines joined as systemd joins them (the backslash becomes a space), runs
// of spaces made one.
func parseUnit(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	opts, err := unit.DeserializeOptions(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("unit does not parse: %v", err)
	}
	m := map[string][]string{}
	for _, o := range opts {
		m[o.Section+"."+o.Name] = append(m[o.Section+"."+o.Name], strings.Join(strings.Fields(strings.ReplaceAll(o.Value, "\\\n", " ")), " "))
	}
	return m
}

// flagValues returns the values of the --flag= words, in order.
func flagValues(words []string, prefix string) []string {
	var values []string
	for _, w := range words {
		if v, ok := strings.CutPrefix(w, prefix); ok {
			values = append(values, v)
		}
	}
	return values
}

func controlPlane() render.ControlPlaneInput {
	return render.ControlPlaneInput{
		Node:   "controller-2",
		NodeIP: "10.0.0.12",
		EtcdMembers: []render.EtcdMember{
			{Name: "controller-1", IP: "10.0.0.11"},
			{Name: "controller-2", IP: "10.0.0.12"},
			{Name: "controller-3", IP: "10.0.0.13"},
		},
		ServiceCIDR: "10.96.0.0/12",
		PodCIDR:     "10.244.0.0/16",
		Images: render.ControlPlaneImages{
			Etcd:              "images.example/etcd:3.6.16-0",
			APIServer:         "images.example/kube-apiserver:v1.35.4",
			ControllerManager: "images.example/kube-controller-manager:v1.35.4",
			Scheduler:         "images.example/kube-scheduler:v1.35.4",
		},
	}
}

func TestStaticPods(t *testing.T) {
	files, err := StaticPods(controlPlane())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, data := range files {
		names = append(names, name)
		golden(t, name, data)

		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(data, &pod); err != nil {
			t.Fatalf("%s: decode strictly: %v", name, err)
		}
		if pod.Name+".yaml" != name || pod.Namespace != "kube-system" || !pod.Spec.HostNetwork ||
			pod.Spec.PriorityClassName != "system-node-critical" || len(pod.Spec.Containers) != 1 {
			t.Errorf("%s: %+v", name, pod.ObjectMeta)
		}
		// Every mount is backed by a host path volume of the same name.
		vols := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			vols[v.Name] = v.HostPath.Path
		}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if vols[m.Name] != m.MountPath {
				t.Errorf("%s: mount %s at %s, host path %q", name, m.Name, m.MountPath, vols[m.Name])
			}
		}
	}
	sort.Strings(names)
	if want := []string{"etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("files %v", names)
	}

	again, _ := StaticPods(controlPlane())
	for name := range files {
		if !bytes.Equal(files[name], again[name]) {
			t.Errorf("%s: two renders differ", name)
		}
	}

	// One controller alone: etcd is a cluster of itself.
	in := controlPlane()
	in.EtcdMembers, in.PodCIDR = nil, ""
	files, err = StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--initial-cluster=controller-2=https://10.0.0.12:2380\n"} {
		if !bytes.Contains(files["etcd.yaml"], []byte(want)) {
			t.Errorf("etcd.yaml lacks %q", want)
		}
	}
	if !bytes.Contains(files["kube-apiserver.yaml"], []byte("--etcd-servers=https://10.0.0.12:2379\n")) {
		t.Error("kube-apiserver.yaml: etcd servers not this node alone")
	}
	if bytes.Contains(files["kube-controller-manager.yaml"], []byte("cluster-cidr")) {
		t.Error("kube-controller-manager.yaml allocates pod CIDRs without podCIDR")
	}

	// Joining a running etcd: the members as etcd's member add gives
	// them, not the inventory's.
	in = controlPlane()
	in.EtcdInitialCluster = "controller-1=https://10.0.0.11:2380,controller-2=https://10.0.0.12:2380,controller-4=https://10.0.0.14:2380"
	in.EtcdInitialClusterState = "existing"
	files, err = StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"etcd.yaml":           "--initial-cluster=" + in.EtcdInitialCluster + "\n    - --initial-cluster-state=existing\n",
		"kube-apiserver.yaml": "--etcd-servers=https://10.0.0.11:2379,https://10.0.0.12:2379,https://10.0.0.14:2379\n",
	} {
		if !bytes.Contains(files[name], []byte(want)) {
			t.Errorf("%s lacks %q:\n%s", name, want, files[name])
		}
	}

	in = controlPlane()
	in.Node, in.NodeIP = "controller-6", "fd00::6"
	in.EtcdMembers = []render.EtcdMember{{Name: "controller-6", IP: "fd00::6"}}
	files, err = StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(files["etcd.yaml"], []byte("--advertise-client-urls=https://[fd00::6]:2379\n")) {
		t.Errorf("IPv6 URLs not bracketed:\n%s", files["etcd.yaml"])
	}
}

// With listen node, every listener binds the node's address: no
// loopback or wildcard address anywhere in the manifests, etcd's clients
// and metrics, the API server, the controller manager and the scheduler
// on 10.0.0.12, the probes asking there. The kubeadm layout (the
// default) renders exactly as without the field.
func TestStaticPodsListenNode(t *testing.T) {
	in := controlPlane()
	in.Listen = ListenNode
	files, err := StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		golden(t, "listen-node-"+name, data)
		for _, other := range []string{"127.0.0.1", "0.0.0.0", "localhost", "::"} {
			if bytes.Contains(data, []byte(other)) {
				t.Errorf("%s names %s", name, other)
			}
		}
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(data, &pod); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := pod.Spec.Containers[0]
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if p != nil && p.HTTPGet.Host != "10.0.0.12" {
				t.Errorf("%s: a probe asks %q", name, p.HTTPGet.Host)
			}
		}
	}
	for name, want := range map[string][]string{
		"etcd.yaml": {"--listen-client-urls=https://10.0.0.12:2379\n", "--listen-metrics-urls=http://10.0.0.12:2381\n",
			"--listen-peer-urls=https://10.0.0.12:2380\n", "--advertise-client-urls=https://10.0.0.12:2379\n"},
		"kube-apiserver.yaml":          {"--bind-address=10.0.0.12\n", "--etcd-servers=https://10.0.0.11:2379,https://10.0.0.12:2379,https://10.0.0.13:2379\n"},
		"kube-controller-manager.yaml": {"--bind-address=10.0.0.12\n"},
		"kube-scheduler.yaml":          {"--bind-address=10.0.0.12\n"},
	} {
		for _, w := range want {
			if !bytes.Contains(files[name], []byte(w)) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}

	in.Listen = ListenKubeadm
	kubeadm, err := StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	unset, _ := StaticPods(controlPlane())
	for name := range unset {
		if !bytes.Equal(kubeadm[name], unset[name]) {
			t.Errorf("%s: listen kubeadm differs from the default", name)
		}
	}
}

// TestFlagsKnownToBinaries checks every flag the static pods and
// kubelet.service pass against the help of the binaries the integration
// control plane runs and the real kubelet (built by scripts/kube-tools.sh;
// the directory it prints, in KEDGE_KUBE_TOOLS).
func TestFlagsKnownToBinaries(t *testing.T) {
	tools := os.Getenv("KEDGE_KUBE_TOOLS")
	if tools == "" {
		t.Skip("KEDGE_KUBE_TOOLS is not set")
	}
	flagRE := regexp.MustCompile(`--([a-z0-9-]+)`)
	known := func(bin string, helpArgs ...[]string) map[string]bool {
		flags := map[string]bool{}
		for _, args := range helpArgs {
			help, _ := exec.Command(filepath.Join(tools, bin), args...).CombinedOutput()
			for _, m := range flagRE.FindAllStringSubmatch(string(help), -1) {
				flags[m[1]] = true
			}
		}
		if len(flags) < 10 {
			t.Fatalf("%s: no flags in its help", bin)
		}
		return flags
	}
	check := func(what, bin string, known map[string]bool, args []string) {
		for _, arg := range args {
			if !strings.HasPrefix(arg, "--") {
				continue
			}
			flag, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			if !known[flag] {
				t.Errorf("%s: %s does not take --%s", what, bin, flag)
			}
		}
	}

	in := controlPlane()
	in.Listen = ListenNode // every flag of both layouts
	files, err := StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		var pod corev1.Pod
		if err := yaml.Unmarshal(data, &pod); err != nil {
			t.Fatal(err)
		}
		command := pod.Spec.Containers[0].Command
		check(name, command[0], known(command[0], []string{"--help"}), command[1:])
	}

	unit, err := KubeletUnit(render.KubeletUnitInput{Runtime: "docker", Image: "images.example/kubelet:v1.35.4", Node: "worker-1", Role: "worker",
		NodeIP: "10.0.0.21", NodeLabels: []string{"role=special"}})
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Fields(parseUnit(t, unit)["Service.ExecStart"][0])
	kubelet := slices.Index(start, "${KUBELET_IMAGE}")
	check("kubelet.service", "kubelet", known("kubelet", []string{"--help"}), start[kubelet+1:])
}

// TestInvalidInput pins every validation message (testdata/errors.golden):
// operators read them.
func TestInvalidInput(t *testing.T) {
	ca := fixture(t, "ca.crt")
	worker := render.KubeletUnitInput{Runtime: "docker", Image: "images.example/kubelet:v1.35.4", Node: "worker-1", Role: "worker"}
	kc := render.KubeconfigInput{ClusterName: "mercury", Server: "https://10.0.0.10:6443", CACert: ca, User: "kubelet-bootstrap", Token: "abcdef.0123456789abcdef"}
	cases := []struct {
		name   string
		render func() error
	}{
		{"kubelet config: bad DNS IP, domain, driver, endpoint", func() error {
			_, err := KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10", "10.96.0.x"}, ClusterDomain: "Cluster_Local", CgroupDriver: "cgroupv2", ContainerRuntimeEndpoint: "/run/containerd/containerd.sock"})
			return err
		}},
		{"kubelet config: no DNS", func() error { _, err := KubeletConfig(render.KubeletConfigInput{}); return err }},
		{"kubeconfig: neither token nor certificate", func() error {
			in := kc
			in.Token = ""
			_, err := Kubeconfig(in)
			return err
		}},
		{"kubeconfig: both token and certificate", func() error {
			in := kc
			in.ClientCert, in.ClientKey = fixture(t, "client.crt"), fixture(t, "client.key")
			_, err := Kubeconfig(in)
			return err
		}},
		{"kubeconfig: certificate without key", func() error {
			in := kc
			in.Token, in.ClientCert = "", fixture(t, "client.crt")
			_, err := Kubeconfig(in)
			return err
		}},
		{"kubeconfig: key not matching certificate", func() error {
			in := kc
			in.Token, in.ClientCert, in.ClientKey = "", ca, fixture(t, "client.key")
			_, err := Kubeconfig(in)
			return err
		}},
		{"kubeconfig: http server, CA not PEM, empty names", func() error {
			_, err := Kubeconfig(render.KubeconfigInput{Server: "http://10.0.0.10:6443", CACert: "not a certificate", User: "kubelet bootstrap", Token: "abcdef.0123456789abcdef"})
			return err
		}},
		{"kubeconfig: server without host, key as CA", func() error {
			in := kc
			in.Server, in.CACert = "https:///api", fixture(t, "client.key")
			_, err := Kubeconfig(in)
			return err
		}},
		{"kubelet unit: bad runtime, image, node, role", func() error {
			_, err := KubeletUnit(render.KubeletUnitInput{Runtime: "rkt", Image: "images.example/kubelet", Node: "Worker_1", Role: "master"})
			return err
		}},
		{"kubelet unit: labels on a controller", func() error {
			in := worker
			in.Role, in.NodeLabels = "controller", []string{"role=special"}
			_, err := KubeletUnit(in)
			return err
		}},
		{"kubelet unit: bad labels", func() error {
			in := worker
			in.NodeLabels = []string{"role", "node-role.kubernetes.io/gpu=true", "role=a b", "-bad=x", "role=x", "role=y"}
			_, err := KubeletUnit(in)
			return err
		}},
		{"kubelet config: bad taints, resolv.conf", func() error {
			_, err := KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}, Role: "worker", ResolvConf: "resolv.conf",
				NodeTaints: []string{"dedicated", "dedicated=gpu:NoDrain", "bad key:NoSchedule", "k=v v:NoExecute", "a=1:NoSchedule", "a=2:NoSchedule"}})
			return err
		}},
		{"kubelet config: taints on a controller", func() error {
			_, err := KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}, Role: "controller", NodeTaints: []string{"role=special:NoSchedule"}})
			return err
		}},
		{"kubelet config: bad role", func() error {
			_, err := KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}, Role: "master"})
			return err
		}},
		{"bridge CNI: bad pod CIDR, node", func() error {
			_, err := BridgeCNIConfig(render.BridgeCNIInput{PodCIDR: "10.244.0.1/16", Nodes: []string{"worker-1"}, Node: "worker_2"})
			return err
		}},
		{"bridge CNI: node not listed", func() error {
			_, err := BridgeCNIConfig(render.BridgeCNIInput{Nodes: []string{"worker-1"}, Node: "worker-2"})
			return err
		}},
		{"bridge CNI: no subnet left", func() error {
			_, err := BridgeCNIConfig(render.BridgeCNIInput{PodCIDR: "10.244.0.0/23", Nodes: []string{"a", "b", "c"}, Node: "c"})
			return err
		}},
		{"bridge CNI: mask larger than the pod CIDR", func() error {
			_, err := BridgeCNIConfig(render.BridgeCNIInput{PodCIDR: "10.244.0.0/24", NodeMaskSize: 16, Nodes: []string{"worker-1"}, Node: "worker-1"})
			return err
		}},
		{"image with spaces", func() error {
			in := worker
			in.Image = "images.example/kubelet:v1 --privileged"
			_, err := KubeletUnit(in)
			return err
		}},
		{"static pods: bad node IP, members, CIDRs, images", func() error {
			in := controlPlane()
			in.NodeIP = "10.0.0.300"
			in.EtcdMembers = append(in.EtcdMembers, render.EtcdMember{Name: "controller-1", IP: "10.0.0.13"})
			in.ServiceCIDR, in.PodCIDR = "10.96.0.1/12", "10.244.0.0"
			in.Images.APIServer, in.Images.Scheduler = "", "images.example/kube-scheduler"
			_, err := StaticPods(in)
			return err
		}},
		{"static pods: an initial cluster of garbage", func() error {
			in := controlPlane()
			in.EtcdInitialCluster = "controller-1=https://10.0.0.11:2380,controller-2,controller-3=http://10.0.0.13:2380,c4=https://10.0.0.14:2379," +
				"c5=https://host.example:2380,Controller_6=https://10.0.0.16:2380,controller-1=https://10.0.0.11:2380"
			_, err := StaticPods(in)
			return err
		}},
		{"static pods: an initial cluster without the node", func() error {
			in := controlPlane()
			in.EtcdInitialCluster = "controller-1=https://10.0.0.11:2380,controller-3=https://10.0.0.13:2380"
			_, err := StaticPods(in)
			return err
		}},
		{"static pods: node not a member, bad state, listen, issuer, port", func() error {
			in := controlPlane()
			in.Node = "controller-9"
			in.EtcdInitialClusterState = "joining"
			in.Listen = "0.0.0.0"
			in.ServiceAccountIssuer = "kubernetes.default.svc"
			in.APIServerPort = 70000
			_, err := StaticPods(in)
			return err
		}},
	}
	var out strings.Builder
	for _, c := range cases {
		err := c.render()
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v is not a *FieldError", c.name, err)
		}
		fmt.Fprintf(&out, "# %s\n%s\n\n", c.name, err)
	}
	golden(t, "errors", []byte(out.String()))
}

// A new certificates value changes every manifest (so the kubelet
// restarts the pods) and nothing else.
func TestStaticPodsCertificatesAnnotation(t *testing.T) {
	in := controlPlane()
	before, err := StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Certificates = "4f:2a"
	after, err := StaticPods(in)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range after {
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(data, &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Annotations[render.CertificatesAnnotation] != "4f:2a" || bytes.Equal(data, before[name]) {
			t.Errorf("%s: annotations %v", name, pod.Annotations)
		}
		var old corev1.Pod
		_ = yaml.UnmarshalStrict(before[name], &old)
		if !reflect.DeepEqual(old.Spec, pod.Spec) {
			t.Errorf("%s: the spec changed too", name)
		}
	}
}

func TestKubeProxy(t *testing.T) {
	objs, err := KubeProxy(KubeProxyInput{Image: "registry.k8s.io/kube-proxy:v1.35.4", Server: "https://10.0.0.10:6443"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := objs.YAML()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kube-proxy.yaml", got)
	if c := objs.DaemonSet.Spec.Template.Spec.Containers[0].Command; !slices.Contains(c, "--cluster-cidr="+DefaultPodCIDR) {
		t.Errorf("command %v lacks the default pod CIDR", c)
	}

	_, err = KubeProxy(KubeProxyInput{Image: "kube-proxy", Server: "http://10.0.0.10:6443", PodCIDR: "10.244.0.1/16"})
	for _, want := range []string{"image: ", "server: ", "podCIDR: "} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad input: %v, want a problem with %q", err, want)
		}
	}
}
