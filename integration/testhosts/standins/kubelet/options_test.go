package main

import (
	"net"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestParseOptionsTakesTheRenderedUnitsFlagsAndIgnoresTheRest(t *testing.T) {
	// The kubelet's command line of kubelet-worker-docker.service.golden,
	// with flags of the real kubelet the simulator does not use, in every
	// form pflag accepts.
	args := []string{
		"--config=/etc/kubernetes/kubelet.yaml",
		"--kubeconfig=/var/lib/kubelet/kubeconfig",
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubeconfig",
		"--hostname-override=worker-1.mercury.example",
		"--node-labels=node.kubernetes.io/node",
		"--node-labels=role=special,node.kubernetes.io/pool=gpu",
		"--register-with-taints=role=special:NoSchedule,dedicated:NoExecute",
		"--container-runtime-endpoint", "unix:///run/containerd/containerd.sock",
		"--v=2", "--fail-swap-on", "-v", "4", "--containerd=/run/containerd/containerd.sock",
		"--node-ip", "10.0.0.21",
	}
	o, err := parseOptions(args, func(k string) string {
		if k == "KEDGE_LAB_IMAGE" {
			return "images.example/kubelet:v1.35.4"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.configFile != "/etc/kubernetes/kubelet.yaml" || o.kubeconfig != "/var/lib/kubelet/kubeconfig" ||
		o.bootstrapKubeconfig != "/etc/kubernetes/bootstrap-kubeconfig" || o.nodeName != "worker-1.mercury.example" {
		t.Errorf("paths and name: %+v", o)
	}
	if o.rootDir != "/var/lib/kubelet" || o.certDir != "/var/lib/kubelet/pki" || o.imagesFile != "/etc/kedge-lab/images" {
		t.Errorf("defaults: root %s cert %s images %s", o.rootDir, o.certDir, o.imagesFile)
	}
	if want := map[string]string{"node.kubernetes.io/node": "", "role": "special", "node.kubernetes.io/pool": "gpu"}; !reflect.DeepEqual(o.nodeLabels, want) {
		t.Errorf("labels %v, want %v", o.nodeLabels, want)
	}
	wantTaints := []corev1.Taint{{Key: "role", Value: "special", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}}
	if !reflect.DeepEqual(o.taints, wantTaints) || !o.taintsGiven {
		t.Errorf("taints %v, want %v", o.taints, wantTaints)
	}
	if len(o.nodeIPs) != 1 || o.nodeIPs[0].String() != "10.0.0.21" {
		t.Errorf("node IPs %v", o.nodeIPs)
	}
	if o.version != "v1.35.4" {
		t.Errorf("version %q", o.version)
	}
	if got := strings.Join(flagNames(o.ignored), " "); got != "--container-runtime-endpoint --containerd --fail-swap-on --v" {
		t.Errorf("ignored %q", got)
	}
}

func TestParseOptionsLabMode(t *testing.T) {
	// How integration/lab starts the simulator.
	o, err := parseOptions([]string{"--kubeconfig=/etc/kubernetes/kubelet.conf", "--hostname-override=node-1"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if o.kubeconfig != "/etc/kubernetes/kubelet.conf" || o.nodeName != "node-1" || o.bootstrapKubeconfig != "" ||
		o.configFile != "" || len(o.nodeIPs) != 0 || o.version != "v0.0.0" || o.heartbeat != defaultHeartbeat ||
		o.cniConfDir != "/etc/cni/net.d" || o.taintsGiven {
		t.Errorf("%+v", o)
	}
}

// --version prints the version the image holds: its tag, or what the
// image's entrypoint says when the tag is not a version.
func TestParseOptionsVersion(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--version"}, map[string]string{"KEDGE_LAB_IMAGE": "quay.io/poseidon/kubelet:v1.35.4"}, "v1.35.4"},
		{[]string{"--version=raw"}, map[string]string{"KEDGE_LAB_IMAGE": "quay.io/poseidon/kubelet:v1.36.1-amd64", "KEDGE_LAB_KUBELET_VERSION": "v1.36.1"}, "v1.36.1"},
	} {
		o, err := parseOptions(c.args, func(k string) string { return c.env[k] })
		if err != nil || !o.printVersion || o.version != c.want {
			t.Errorf("%q %v: print %t version %q (%v), want %q", c.args, c.env, o.printVersion, o.version, err, c.want)
		}
	}
	if o, err := parseOptions([]string{"--version=false"}, func(string) string { return "" }); err != nil || o.printVersion {
		t.Errorf("--version=false: %+v %v", o.printVersion, err)
	}
}

func TestParseOptionsRejectsBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--node-ip=10.0.0.300"},
		{"--node-labels=node-role.kubernetes.io/worker="},
		{"--node-labels=role=a b"},
		{"--register-with-taints=role=special"},
		{"--kubeconfig"},
		{"--version=yes"},
	} {
		if _, err := parseOptions(args, func(string) string { return "" }); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestParseTaints(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []corev1.Taint
		err  string
	}{
		{in: ""},
		{in: "a=b:NoSchedule", want: []corev1.Taint{{Key: "a", Value: "b", Effect: corev1.TaintEffectNoSchedule}}},
		{in: "example.com/gpu:PreferNoSchedule,x=:NoExecute", want: []corev1.Taint{
			{Key: "example.com/gpu", Effect: corev1.TaintEffectPreferNoSchedule}, {Key: "x", Effect: corev1.TaintEffectNoExecute}}},
		{in: "a=b:NoSchedule,a=c:NoExecute", want: []corev1.Taint{
			{Key: "a", Value: "b", Effect: corev1.TaintEffectNoSchedule}, {Key: "a", Value: "c", Effect: corev1.TaintEffectNoExecute}}},
		{in: "a=b", err: "not key[=value]:Effect"},
		{in: "a=b:Sometimes", err: "not a taint effect"},
		{in: "-a=b:NoSchedule", err: "invalid key"},
		{in: "a=b c:NoSchedule", err: "invalid value"},
		{in: "a=b:NoSchedule,a=c:NoSchedule", err: "given twice"},
	} {
		got, err := parseTaints(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestLoadConfigReadsTheRenderedConfig(t *testing.T) {
	cfg, err := loadConfig("../../../../activities/nodefiles/testdata/kubelet.yaml.golden", "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StaticPodPath != "/etc/kubernetes/manifests" || cfg.Authentication.X509.ClientCAFile != "/etc/kubernetes/ca.crt" ||
		*cfg.Authentication.Anonymous.Enabled || cfg.HealthzBindAddress != "127.0.0.1" || *cfg.HealthzPort != 10248 ||
		cfg.Port != 10250 || cfg.PodLogsDir != "/var/log/pods" {
		t.Errorf("%+v", cfg)
	}
	noFile, err := loadConfig("", "")
	if err != nil || !*noFile.Authentication.Anonymous.Enabled {
		t.Errorf("without a file anonymous requests are allowed, as with the kubelet's flag defaults: %v", err)
	}
}

func TestDetectNodeIPs(t *testing.T) {
	dir := t.TempDir()
	if ips, err := detectNodeIPs(dir + "/missing"); err != nil || ips != nil {
		t.Errorf("missing file: %v %v", ips, err)
	}
	writeFile(t, dir+"/node-ip", "127.0.20.5\n", 0o644)
	if ips, err := detectNodeIPs(dir + "/node-ip"); err != nil || len(ips) != 1 || ips[0].String() != "127.0.20.5" {
		t.Errorf("node-ip file: %v %v", ips, err)
	}
	writeFile(t, dir+"/bad", "host-5\n", 0o644)
	if _, err := detectNodeIPs(dir + "/bad"); err == nil {
		t.Error("a file without an IP is accepted")
	}
}

func TestHealthzAddress(t *testing.T) {
	nodeIPs, _ := parseNodeIPs("127.0.20.5")
	for _, tc := range []struct {
		addr string
		port int32
		ips  bool
		want string
	}{
		{"127.0.0.1", 10248, false, "127.0.0.1:10248"},
		{"127.0.0.1", 10248, true, "127.0.20.5:10248"}, // loopback is shared: the node IP instead
		{"0.0.0.0", 10248, true, "127.0.20.5:10248"},
		{"10.1.2.3", 10248, true, "10.1.2.3:10248"},
		{"127.0.0.1", 0, true, ""}, // 0 disables healthz
	} {
		cfg := withConfigDefaults(&kubeletv1beta1.KubeletConfiguration{HealthzBindAddress: tc.addr, HealthzPort: ptr.To(tc.port)})
		var ips []net.IP
		if tc.ips {
			ips = nodeIPs
		}
		if got := healthzAddress(cfg, ips); got != tc.want {
			t.Errorf("%s:%d (node IP %t): %q, want %q", tc.addr, tc.port, tc.ips, got, tc.want)
		}
	}
}
