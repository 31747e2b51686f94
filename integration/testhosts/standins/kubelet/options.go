package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Defaults of the flags the simulator reads.
const (
	defaultKubeconfig = "/etc/kubernetes/kubelet.conf"
	defaultRootDir    = "/var/lib/kubelet"
	defaultImagesFile = "/etc/kedge-lab/images"
	defaultNodeIPFile = "/etc/kedge-lab/node-ip"
	defaultHeartbeat  = 2 * time.Second
)

// options are the kubelet's command line, as far as the simulator uses it.
type options struct {
	configFile          string // --config: KubeletConfiguration file
	kubeconfig          string // --kubeconfig
	bootstrapKubeconfig string // --bootstrap-kubeconfig
	rootDir             string // --root-dir
	certDir             string // --cert-dir (default ROOT-DIR/pki)
	nodeName            string // --hostname-override (default: the host name)
	nodeIPs             []net.IP
	nodeLabels          map[string]string
	taints              []corev1.Taint
	healthzBindAddress  string        // --healthz-bind-address, overrides the config's
	healthzPort         int           // --healthz-port, overrides the config's; -1 when not given
	heartbeat           time.Duration // simulator only: how often the Node status is posted
	imagesFile          string        // simulator only: image → program map
	nodeIPFile          string        // simulator only: the host's IP, when --node-ip is not given
	version             string        // the tag of the image the kubelet runs as (KEDGE_LAB_IMAGE)
	ignored             []string      // flags of the real kubelet not simulated
}

// simulated lists the flags the simulator reads; every one takes a value.
var simulated = map[string]bool{
	"config": true, "kubeconfig": true, "bootstrap-kubeconfig": true,
	"root-dir": true, "cert-dir": true, "hostname-override": true,
	"node-ip": true, "node-labels": true, "register-with-taints": true,
	"healthz-bind-address": true, "healthz-port": true,
	"heartbeat": true, "lab-images": true, "lab-node-ip-file": true,
}

// parseOptions reads the kubelet's arguments (with or without the leading
// `kubelet` a container's command line has). Flags of the real kubelet it
// does not simulate are accepted and ignored, whether written --flag=value,
// --flag value or --flag: the kubelet takes no positional arguments, so a
// word after an unknown flag is its value.
func parseOptions(args []string, getenv func(string) string) (options, error) {
	if len(args) > 0 && args[0] == "kubelet" {
		args = args[1:]
	}
	known, ignored := splitFlags(args)
	fs := flag.NewFlagSet("kubelet", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := options{ignored: ignored}
	var nodeIP, labels, taints string
	fs.StringVar(&o.configFile, "config", "", "KubeletConfiguration file")
	fs.StringVar(&o.kubeconfig, "kubeconfig", defaultKubeconfig, "kubeconfig")
	fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig with a bootstrap token")
	fs.StringVar(&o.rootDir, "root-dir", defaultRootDir, "kubelet state")
	fs.StringVar(&o.certDir, "cert-dir", "", "client and serving certificates (default ROOT-DIR/pki)")
	fs.StringVar(&o.nodeName, "hostname-override", "", "node name")
	fs.StringVar(&nodeIP, "node-ip", "", "node IPs, comma-separated")
	fs.StringVar(&labels, "node-labels", "", "k=v,... labels to register with")
	fs.StringVar(&taints, "register-with-taints", "", "key[=value]:Effect,... taints to register with")
	fs.StringVar(&o.healthzBindAddress, "healthz-bind-address", "", "healthz address (overrides the config)")
	fs.IntVar(&o.healthzPort, "healthz-port", -1, "healthz port, 0 to disable (overrides the config)")
	fs.DurationVar(&o.heartbeat, "heartbeat", defaultHeartbeat, "status heartbeat (simulator only)")
	fs.StringVar(&o.imagesFile, "lab-images", defaultImagesFile, "image map (simulator only)")
	fs.StringVar(&o.nodeIPFile, "lab-node-ip-file", defaultNodeIPFile, "the host's IP when --node-ip is not given (simulator only)")
	if err := fs.Parse(known); err != nil {
		return options{}, err
	}
	if o.certDir == "" {
		o.certDir = filepath.Join(o.rootDir, "pki")
	}
	var err error
	if o.nodeIPs, err = parseNodeIPs(nodeIP); err != nil {
		return options{}, err
	}
	if o.nodeLabels, err = parseLabels(labels); err != nil {
		return options{}, err
	}
	if o.taints, err = parseTaints(taints); err != nil {
		return options{}, err
	}
	o.version = imageVersion(getenv("KEDGE_LAB_IMAGE"))
	return o, nil
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

// splitFlags separates the flags the simulator reads from the rest.
func splitFlags(args []string) (known, ignored []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			ignored = append(ignored, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			ignored = append(ignored, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if simulated[name] {
			known = append(known, a)
			if !hasValue && i+1 < len(args) {
				i++
				known = append(known, args[i])
			}
			continue
		}
		ignored = append(ignored, a)
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			ignored = append(ignored, args[i])
		}
	}
	return known, ignored
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

// parseLabels reads --node-labels: key=value,...
func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--node-labels: %q is not key=value", kv)
		}
		labels[k] = v
	}
	return labels, nil
}
