package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// Defaults of the flags the simulator reads.
const (
	defaultKubeconfig = "/etc/kubernetes/kubelet.conf"
	defaultRootDir    = "/var/lib/kubelet"
	defaultImagesFile = "/etc/kedge-lab/images"
	defaultNodeIPFile = "/etc/kedge-lab/node-ip"
	defaultHeartbeat  = 2 * time.Second
)

// Environment variables of the simulator's own settings, for tests: the
// real kubelet has no such flags, so they are not flags here either.
const (
	envImages      = "KEDGE_LAB_IMAGES"       // the image map (default /etc/kedge-lab/images)
	envNodeIPFile  = "KEDGE_LAB_NODE_IP_FILE" // the host's IP when --node-ip is not given
	envHeartbeat   = "KEDGE_LAB_HEARTBEAT"    // how often the node, its network and pods are looked at (2s)
	envCNIConfDir  = "KEDGE_LAB_CNI_CONF_DIR" // where the network config is looked for (/etc/cni/net.d)
	defaultCNIConf = "/etc/cni/net.d"
	envHostMountNS = "KEDGE_LAB_HOST_MOUNT_NS" // the mount namespace static pods run in (/proc/1/ns/mnt; "none": the simulator's)
	// The kubelet version the image holds, set by the image's entrypoint
	// in the image store when its tag is not the version (v1.36.1-amd64,
	// build-SHA); else the tag is.
	envKubeletVersion = "KEDGE_LAB_KUBELET_VERSION"
)

// options are the kubelet's command line, as far as the simulator uses it.
type options struct {
	configFile          string // --config: KubeletConfiguration file
	configDir           string // --config-dir: drop-ins merged over it
	kubeconfig          string // --kubeconfig
	bootstrapKubeconfig string // --bootstrap-kubeconfig
	rootDir             string // --root-dir
	certDir             string // --cert-dir (default ROOT-DIR/pki)
	nodeName            string // --hostname-override (default: the host name)
	nodeIPs             []net.IP
	nodeLabels          map[string]string
	taints              []corev1.Taint // --register-with-taints
	taintsGiven         bool           // --register-with-taints was given: it overrides the config's
	healthzBindAddress  string         // --healthz-bind-address, overrides the config's
	healthzPort         int            // --healthz-port, overrides the config's; -1 when not given
	heartbeat           time.Duration  // simulator only: how often the Node status is posted
	imagesFile          string         // simulator only: image → program map
	nodeIPFile          string         // simulator only: the host's IP, when --node-ip is not given
	cniConfDir          string         // simulator only: the CNI config directory
	hostMountNS         string         // simulator only: KEDGE_LAB_HOST_MOUNT_NS as given
	version             string         // the version of the image the kubelet runs as (KEDGE_LAB_IMAGE)
	printVersion        bool           // --version: print it and exit
	ignored             []string       // flags of the real kubelet given but not simulated
	help                bool           // -h/--help: print the flags and exit
}

// simulated lists the flags the simulator reads.
var simulated = map[string]bool{
	"config": true, "config-dir": true, "kubeconfig": true, "bootstrap-kubeconfig": true,
	"root-dir": true, "cert-dir": true, "hostname-override": true,
	"node-ip": true, "node-labels": true, "register-with-taints": true,
	"healthz-bind-address": true, "healthz-port": true,
}

// nodeLabelsFlag is --node-labels as the real kubelet reads it: key=value
// or a bare key (value ""), comma-separated, the flag repeatable, later
// values winning.
type nodeLabelsFlag map[string]string

func (m nodeLabelsFlag) String() string {
	pairs := make([]string, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func (m nodeLabelsFlag) Set(value string) error {
	for _, s := range strings.Split(value, ",") {
		if s == "" {
			continue
		}
		k, v, _ := strings.Cut(s, "=")
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

func (nodeLabelsFlag) Type() string { return "mapStringString" }

// ignoredValue takes the value of a flag of the real kubelet the
// simulator does not use.
type ignoredValue struct{ typ, value string }

func (v *ignoredValue) String() string     { return v.value }
func (v *ignoredValue) Set(s string) error { v.value = s; return nil }
func (v *ignoredValue) Type() string       { return v.typ }

// parseOptions reads the kubelet's arguments as the real kubelet v1.35
// parses them (pflag, `_` and `-` alike in names): only its flags, each
// in the forms pflag takes (--flag=value, --flag value, a bool alone), and
// no positional argument ("unknown command kubelet": the kubelet image's
// entrypoint is the kubelet, so a unit must not name it again). Flags of
// the real kubelet the simulator does not use are accepted and ignored.
func parseOptions(args []string, getenv func(string) string) (options, error) {
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	o := options{nodeLabels: map[string]string{}}
	var nodeIP, taints string
	fs.StringVar(&o.configFile, "config", "", "KubeletConfiguration file")
	fs.StringVar(&o.configDir, "config-dir", "", "KubeletConfiguration drop-ins (*.conf) merged over --config")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig")
	fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig with a bootstrap token")
	fs.StringVar(&o.rootDir, "root-dir", defaultRootDir, "kubelet state")
	fs.StringVar(&o.certDir, "cert-dir", "", "client and serving certificates (default ROOT-DIR/pki)")
	fs.StringVar(&o.nodeName, "hostname-override", "", "node name")
	fs.StringVar(&nodeIP, "node-ip", "", "node IPs, comma-separated")
	fs.Var(nodeLabelsFlag(o.nodeLabels), "node-labels", "k=v,... labels to register with")
	fs.StringVar(&taints, "register-with-taints", "", "key[=value]:Effect,... taints to register with")
	fs.StringVar(&o.healthzBindAddress, "healthz-bind-address", "", "healthz address (overrides the config)")
	fs.IntVar(&o.healthzPort, "healthz-port", -1, "healthz port, 0 to disable (overrides the config)")
	for _, name := range realBoolFlags {
		fs.Bool(name, false, "not simulated")
	}
	for _, name := range realValueFlags {
		if fs.Lookup(name) == nil {
			fs.Var(&ignoredValue{typ: "string"}, name, "not simulated")
		}
	}
	fs.VarP(&ignoredValue{typ: "Level"}, "v", "v", "log verbosity (not simulated)")
	version := &ignoredValue{typ: "version", value: "false"}
	fs.Var(version, "version", "print the version and exit")
	fs.Lookup("version").NoOptDefVal = "true"
	fs.BoolVarP(&o.help, "help", "h", false, "help for kubelet")
	if err := fs.Parse(args); err != nil {
		return options{}, fmt.Errorf("failed to parse kubelet flag: %w", err)
	}
	if cmds := fs.Args(); len(cmds) > 0 {
		return options{}, fmt.Errorf("unknown command %s", cmds[0])
	}
	switch version.value {
	case "true", "raw":
		o.printVersion = true
	case "false":
	default:
		return options{}, fmt.Errorf("failed to parse kubelet flag: invalid argument %q for \"--version\" flag: unrecognized version type %q", version.value, version.value)
	}
	fs.Visit(func(f *pflag.Flag) {
		if !simulated[f.Name] && f.Name != "help" && f.Name != "version" {
			o.ignored = append(o.ignored, "--"+f.Name)
		}
	})
	o.taintsGiven = fs.Changed("register-with-taints")
	if !fs.Changed("kubeconfig") {
		o.kubeconfig = defaultKubeconfig
	}
	if o.certDir == "" {
		o.certDir = filepath.Join(o.rootDir, "pki")
	}
	var err error
	if o.nodeIPs, err = parseNodeIPs(nodeIP); err != nil {
		return options{}, err
	}
	if err := validateNodeLabels(o.nodeLabels); err != nil {
		return options{}, err
	}
	if o.taints, err = parseTaints(taints); err != nil {
		return options{}, err
	}
	o.imagesFile = cmp.Or(getenv(envImages), defaultImagesFile)
	o.nodeIPFile = cmp.Or(getenv(envNodeIPFile), defaultNodeIPFile)
	o.cniConfDir = cmp.Or(getenv(envCNIConfDir), defaultCNIConf)
	o.hostMountNS = getenv(envHostMountNS)
	o.heartbeat = defaultHeartbeat
	if h := getenv(envHeartbeat); h != "" {
		if o.heartbeat, err = time.ParseDuration(h); err != nil || o.heartbeat <= 0 {
			return options{}, fmt.Errorf("%s=%q is not a positive duration", envHeartbeat, h)
		}
	}
	// The version the image holds: set by its entrypoint in the image
	// store when its tag does not say it (arch-suffixed, build-SHA),
	// else its tag.
	o.version = cmp.Or(getenv(envKubeletVersion), imageVersion(getenv("KEDGE_LAB_IMAGE")))
	return o, nil
}

// validateNodeLabels refuses what the real kubelet refuses in
// --node-labels: keys that are not qualified names, values that are not
// label values, and keys in the kubernetes.io and k8s.io namespaces other
// than the ones a kubelet may set (node.kubernetes.io/,
// kubelet.kubernetes.io/ and the well-known topology and instance labels:
// the real kubelet's own list).
func validateNodeLabels(labels map[string]string) error {
	var unknown, invalid []string
	for k, v := range labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", k, strings.Join(msgs, ", ")))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", v, strings.Join(msgs, ", ")))
		}
		if isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	sort.Strings(invalid)
	if len(unknown) > 0 {
		return fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v", unknown)
	}
	if len(invalid) > 0 {
		return fmt.Errorf("invalid node labels: %s", strings.Join(invalid, "; "))
	}
	return nil
}

// isKubernetesLabel says whether the key is in the kubernetes.io or k8s.io
// namespace.
func isKubernetesLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	in := func(ns string) bool { return prefix == ns || strings.HasSuffix(prefix, "."+ns) }
	return ok && (in("kubernetes.io") || in("k8s.io"))
}

// detectNodeIPs stands for the real kubelet's detection of the node's IP
// when --node-ip is not given (from the host name or the default route,
// neither of which tells test hosts apart, since they share the machine's
// network): the address in the node IP file, if there is one.
func detectNodeIPs(file string) ([]net.IP, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ips, err := parseNodeIPs(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ips, nil
}

// imageVersion is the tag of image, or v0.0.0 when it has none.
func imageVersion(image string) string {
	if image != "" && !strings.Contains(image, "@") {
		if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
			return image[i+1:]
		}
	}
	return "v0.0.0"
}

// parseNodeIPs reads --node-ip: one IP, or two (dual stack). An unspecified
// address (0.0.0.0, ::) means none, as for the real kubelet.
func parseNodeIPs(s string) ([]net.IP, error) {
	var ips []net.IP
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ip := net.ParseIP(f)
		if ip == nil {
			return nil, fmt.Errorf("--node-ip: %q is not an IP address", f)
		}
		if !ip.IsUnspecified() {
			ips = append(ips, ip)
		}
	}
	if len(ips) > 2 {
		return nil, fmt.Errorf("--node-ip: at most two addresses (one per family), got %d", len(ips))
	}
	return ips, nil
}
