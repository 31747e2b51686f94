package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func noEnv(string) string { return "" }

// The real kubelet refuses positional arguments: a unit that names the
// kubelet after an image whose entrypoint is the kubelet fails to start.
func TestParseOptionsRefusesPositionalArguments(t *testing.T) {
	for _, args := range [][]string{
		{"kubelet", "--config=/etc/kubernetes/kubelet.yaml"},
		{"--config=/etc/kubernetes/kubelet.yaml", "kubelet"},
		{"--fail-swap-on", "false"}, // a bool takes no separate value
	} {
		_, err := parseOptions(args, noEnv)
		if err == nil || !strings.HasPrefix(err.Error(), "unknown command ") {
			t.Errorf("%q: %v, want unknown command", args, err)
		}
	}
}

// Only the real kubelet's flags are accepted; the simulator's own
// settings are not flags.
func TestParseOptionsRefusesUnknownFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag=1"},
		{"--lab-images=/etc/kedge-lab/images"},
		{"--heartbeat=1s"},
		{"--lab-node-ip-file", "/etc/kedge-lab/node-ip"},
		{"-x"},
		{"--node-labels"}, // a value flag without its value
	} {
		_, err := parseOptions(args, noEnv)
		if err == nil || !strings.HasPrefix(err.Error(), "failed to parse kubelet flag: ") {
			t.Errorf("%q: %v, want a flag parse error", args, err)
		}
	}
	// Names with underscores are the same flags, as pflag normalizes them
	// for the kubelet; and the simulator's settings come from its
	// environment.
	o, err := parseOptions([]string{"--hostname_override=node-1", "--housekeeping_interval=10s"}, func(k string) string {
		return map[string]string{envHeartbeat: "250ms", envCNIConfDir: "/tmp/net.d", envImages: "/tmp/images", envNodeIPFile: "/tmp/ip"}[k]
	})
	if err != nil || o.nodeName != "node-1" || o.heartbeat != 250*time.Millisecond || o.cniConfDir != "/tmp/net.d" ||
		o.imagesFile != "/tmp/images" || o.nodeIPFile != "/tmp/ip" {
		t.Errorf("%+v %v", o, err)
	}
}

// The config file decodes strictly into the KubeletConfiguration type.
func TestLoadConfigRefusesUnknownAndDuplicateFields(t *testing.T) {
	dir := t.TempDir()
	head := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	for _, c := range []struct{ name, body, want string }{
		{"unknown field", head + "staticPodPath: /etc/kubernetes/manifests\nregisterWithTaint: []\n", `unknown field "registerWithTaint"`},
		{"unknown nested field", head + "authentication:\n  anonymous:\n    enable: false\n", `unknown field "authentication.anonymous.enable"`},
		{"duplicate field", head + "port: 10250\nport: 10251\n", `"port" already set`},
		{"wrong type", head + "port: ten\n", "port"},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfig\n", "KubeletConfig"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
		writeFile(t, path, c.body, 0o644)
		_, err := loadConfig(path, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	// What Kedge renders decodes, taints and all.
	path := filepath.Join(dir, "good.yaml")
	writeFile(t, path, head+"registerWithTaints:\n- key: node-role.kubernetes.io/controller\n  effect: NoSchedule\nresolvConf: /run/systemd/resolve/resolv.conf\nshutdownGracePeriod: 45s\n", 0o644)
	cfg, err := loadConfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.RegisterWithTaints) != 1 || cfg.RegisterWithTaints[0].Key != "node-role.kubernetes.io/controller" {
		t.Errorf("taints %v", cfg.RegisterWithTaints)
	}
	// --register-with-taints, when given, replaces the config's.
	o, err := parseOptions([]string{"--register-with-taints=a=b:NoExecute"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := withFlags(cfg, o).RegisterWithTaints; len(got) != 1 || got[0].Key != "a" {
		t.Errorf("flag did not replace the config's taints: %v", got)
	}
}

// testConflist is a valid bridge network config.
const testConflist = `{"cniVersion": "1.0.0", "name": "test", "plugins": [{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.9.0/24"}]]}}, {"type": "portmap"}]}`

func TestNetworkConfig(t *testing.T) {
	dir := t.TempDir()
	if file, why := networkConfig(filepath.Join(dir, "missing")); file != "" || why == "" {
		t.Errorf("missing dir: %q %q", file, why)
	}
	if file, _ := networkConfig(dir); file != "" {
		t.Errorf("empty dir: %q", file)
	}
	for name, body := range map[string]string{
		"00-broken.conflist":    `{"name": "x", "plugins": [`,
		"01-noname.conflist":    `{"plugins": [{"type": "bridge"}]}`,
		"02-noplugins.conflist": `{"name": "x", "plugins": []}`,
		"03-notype.conf":        `{"name": "x"}`,
		"04-ignored.txt":        testConflist,
	} {
		writeFile(t, filepath.Join(dir, name), body, 0o644)
	}
	file, why := networkConfig(dir)
	if file != "" || !strings.Contains(why, "no name") || !strings.Contains(why, "no plugins") || !strings.Contains(why, "missing 'type'") {
		t.Errorf("invalid configs: %q %q", file, why)
	}
	writeFile(t, filepath.Join(dir, "10-kedge-bridge.conflist"), testConflist, 0o644)
	if file, _ := networkConfig(dir); filepath.Base(file) != "10-kedge-bridge.conflist" {
		t.Errorf("valid config not found: %q", file)
	}
	// The conflist Kedge renders is one.
	rendered, err := os.ReadFile("../../../../activities/nodefiles/testdata/10-kedge-bridge.conflist.golden")
	if err != nil {
		t.Fatal(err)
	}
	if err := validCNIConfig(rendered, true); err != nil {
		t.Errorf("rendered conflist: %v", err)
	}
}

func TestReadyConditionFollowsTheNetwork(t *testing.T) {
	now := metav1.Now()
	ready := func(cs []corev1.NodeCondition) corev1.NodeCondition {
		i := slices.IndexFunc(cs, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
		return cs[i]
	}
	c := ready(conditions(nil, now, false))
	if c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" ||
		!strings.Contains(c.Message, "NetworkPluginNotReady") || !strings.Contains(c.Message, "cni plugin not initialized") {
		t.Errorf("without a network: %+v", c)
	}
	later := metav1.NewTime(now.Add(time.Minute))
	c = ready(conditions(conditions(nil, now, false), later, true))
	if c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&later) {
		t.Errorf("with a network: %+v", c)
	}
}

// TestKubeletFlagsAreTheRealOnes checks the simulator's flag lists against
// the real kubelet's help (built by scripts/kube-tools.sh; the directory
// it prints, in KEDGE_KUBE_TOOLS).
func TestKubeletFlagsAreTheRealOnes(t *testing.T) {
	tools := os.Getenv("KEDGE_KUBE_TOOLS")
	if tools == "" {
		t.Skip("KEDGE_KUBE_TOOLS is not set")
	}
	help, _ := exec.Command(filepath.Join(tools, "kubelet"), "--help").CombinedOutput()
	real := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		real[m[1]] = true
	}
	if len(real) < 100 {
		t.Fatalf("%d flags in the kubelet's help:\n%s", len(real), help)
	}
	mine := map[string]bool{"help": true, "v": true, "version": true}
	for _, f := range append(slices.Clone(realBoolFlags), realValueFlags...) {
		mine[f] = true
	}
	for f := range real {
		if !mine[f] {
			t.Errorf("the real kubelet has --%s, the simulator refuses it", f)
		}
	}
	for f := range mine {
		if !real[f] {
			t.Errorf("the simulator accepts --%s, the real kubelet does not have it", f)
		}
	}
	// Both refuse the same way.
	for _, args := range [][]string{{"kubelet"}, {"--no-such-flag"}} {
		out, _ := exec.Command(filepath.Join(tools, "kubelet"), args...).CombinedOutput()
		_, err := parseOptions(args, noEnv)
		if err == nil || !strings.Contains(string(out), err.Error()) {
			t.Errorf("%q: the real kubelet says\n%s\nthe simulator %v", args, out, err)
		}
	}
}

// --config-dir: *.conf drop-ins merge over the config in name order, as
// the real kubelet merges them (fields replaced, lists whole, other files
// skipped); a drop-in that does not decode strictly, or a missing
// directory, stops the kubelet.
func TestLoadConfigMergesDropIns(t *testing.T) {
	dir := t.TempDir()
	head := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	path := filepath.Join(dir, "kubelet.yaml")
	writeFile(t, path, head+"cgroupDriver: systemd\nclusterDNS: [10.96.0.10]\nport: 10250\nauthentication:\n  webhook:\n    enabled: true\n", 0o644)
	d := filepath.Join(dir, "kubelet.conf.d")
	writeFile(t, filepath.Join(d, "50-machine.conf"), head+"cgroupDriver: cgroupfs\nclusterDNS: [10.3.0.10, 10.3.0.11]\nauthentication:\n  anonymous:\n    enabled: false\n", 0o644)
	writeFile(t, filepath.Join(d, "90-last.conf"), head+"cgroupRoot: /kedge\nclusterDNS: [10.3.0.12]\n", 0o644)
	writeFile(t, filepath.Join(d, "README"), "not a drop-in: skipped\n", 0o644)
	cfg, err := loadConfig(path, d)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CgroupDriver != "cgroupfs" || cfg.CgroupRoot != "/kedge" || cfg.Port != 10250 {
		t.Errorf("merged: cgroupDriver %q, cgroupRoot %q, port %d", cfg.CgroupDriver, cfg.CgroupRoot, cfg.Port)
	}
	if strings.Join(cfg.ClusterDNS, ",") != "10.3.0.12" {
		t.Errorf("clusterDNS %v: the last drop-in's list replaces the others whole", cfg.ClusterDNS)
	}
	if cfg.Authentication.Webhook.Enabled == nil || !*cfg.Authentication.Webhook.Enabled {
		t.Errorf("authentication.webhook.enabled lost in the merge of authentication.anonymous")
	}

	writeFile(t, filepath.Join(d, "95-typo.conf"), head+"cgroupsRoot: /x\n", 0o644)
	if _, err := loadConfig(path, d); err == nil || !strings.Contains(err.Error(), `unknown field "cgroupsRoot"`) || !strings.Contains(err.Error(), "95-typo.conf") {
		t.Errorf("drop-in with an unknown field: %v", err)
	}
	if _, err := loadConfig(path, filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing --config-dir was accepted")
	}
}
