package render

import (
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Node roles. Only workers take initial labels and taints (seed 001):
// workloads are not scheduled on controllers, so theirs are not for the
// operator to change.
const (
	RoleController = "controller"
	RoleWorker     = "worker"
)

// KubeletImageVariable is the variable of kubelet.service that names the
// kubelet image. A drop-in that sets it swaps the image (seed 000), e.g.
// host.write-dropin writing /etc/systemd/system/kubelet.service.d/10-image.conf.
const KubeletImageVariable = "KUBELET_IMAGE"

// KubeletUnitInput describes kubelet.service for one node.
type KubeletUnitInput struct {
	// Runtime runs the kubelet container: "docker" (Flatcar Linux) or
	// "podman" (Fedora CoreOS).
	Runtime string `json:"runtime"`
	// Image is the kubelet image, pinned by tag or digest. It has the
	// kubelet (and kubectl, for delete-node.service) on its PATH.
	Image string `json:"image"`
	// Node is the node's name in the cluster (--hostname-override).
	Node string `json:"node"`
	// Role is "controller" or "worker".
	Role string `json:"role"`
	// NodeIP is the address the node registers and serves on
	// (--node-ip); empty lets the kubelet pick one, which on a host with
	// several interfaces may be the wrong one.
	NodeIP string `json:"nodeIP,omitempty"`
	// NodeLabels are key=value labels the node registers with. Workers
	// only.
	NodeLabels []string `json:"nodeLabels,omitempty"`
	// NodeTaints are key[=value]:Effect taints the node registers with.
	// Workers only.
	NodeTaints []string `json:"nodeTaints,omitempty"`
}

func (in KubeletUnitInput) validate() error {
	var p problems
	checkRuntime(&p, "runtime", in.Runtime)
	checkImage(&p, "image", in.Image)
	checkDNSName(&p, "node", in.Node)
	if in.NodeIP != "" && net.ParseIP(in.NodeIP) == nil {
		p.add("nodeIP", "%q is not an IP address", in.NodeIP)
	}
	switch in.Role {
	case RoleWorker:
	case RoleController:
		if len(in.NodeLabels) > 0 {
			p.add("nodeLabels", "only workers take initial labels; %s is a controller", in.Node)
		}
		if len(in.NodeTaints) > 0 {
			p.add("nodeTaints", "only workers take initial taints; %s is a controller", in.Node)
		}
	default:
		p.add("role", "%q is not a role (want %s)", in.Role, quoteList(RoleController, RoleWorker))
	}
	seen := map[string]bool{}
	for i, l := range in.NodeLabels {
		field := fmt.Sprintf("nodeLabels[%d]", i)
		key, value, ok := strings.Cut(l, "=")
		if !ok {
			p.add(field, "%q is not key=value", l)
			continue
		}
		checkLabelKey(&p, field, key)
		if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
			p.add(field, "%q is not a label value: %s", value, strings.Join(msgs, "; "))
		}
		if seen[key] {
			p.add(field, "label %q is given twice", key)
		}
		seen[key] = true
	}
	for i, t := range in.NodeTaints {
		checkTaint(&p, fmt.Sprintf("nodeTaints[%d]", i), t)
	}
	return p.err()
}

// checkLabelKey reports a key that is not a label key, or one the kubelet
// refuses to register a node with: in the kubernetes.io and k8s.io
// namespaces it may only set node.kubernetes.io/ and kubelet.kubernetes.io/
// keys (node-role.kubernetes.io/ is for the cluster admin to set).
func checkLabelKey(p *problems, field, key string) {
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		p.add(field, "%q is not a label key: %s", key, strings.Join(msgs, "; "))
		return
	}
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return
	}
	inNamespace := func(domain, ns string) bool { return domain == ns || strings.HasSuffix(domain, "."+ns) }
	if (inNamespace(prefix, "kubernetes.io") || inNamespace(prefix, "k8s.io")) &&
		!inNamespace(prefix, "node.kubernetes.io") && !inNamespace(prefix, "kubelet.kubernetes.io") {
		p.add(field, "the kubelet may not set %q: under kubernetes.io and k8s.io it may only set node.kubernetes.io/ and kubelet.kubernetes.io/ labels", key)
	}
}

// checkTaint reports a value that is not key[=value]:Effect.
func checkTaint(p *problems, field, t string) {
	kv, effect, ok := strings.Cut(t, ":")
	if !ok {
		p.add(field, "%q is not key[=value]:Effect", t)
		return
	}
	switch corev1.TaintEffect(effect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		p.add(field, "%q is not a taint effect (want %s)", effect,
			quoteList(string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)))
	}
	key, value, _ := strings.Cut(kv, "=")
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		p.add(field, "%q is not a taint key: %s", key, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		p.add(field, "%q is not a taint value: %s", value, strings.Join(msgs, "; "))
	}
}

// kubeletMounts are the host paths the kubelet container sees (seeds 000,
// 003): its config read-only, its state with mount propagation so pod
// volumes it mounts reach the runtime, logs, the runtime's socket under
// /run, /sys read-only except the cgroup tree it manages, and devices.
var kubeletMounts = []string{
	KubernetesDir + ":" + KubernetesDir + ":ro",
	KubeletDir + ":" + KubeletDir + ":rshared",
	"/var/log:/var/log",
	"/run:/run",
	"/sys:/sys:ro",
	"/sys/fs/cgroup:/sys/fs/cgroup",
	"/dev:/dev",
}

// KubeletUnit renders kubelet.service (seed 000): the kubelet runs as a
// privileged container of ${KUBELET_IMAGE} started by an inline ExecStart,
// so a drop-in setting KUBELET_IMAGE swaps the image. It joins the cluster
// through TLS bootstrap: BootstrapKubeconfigPath holds a bootstrap token,
// and the kubelet writes KubeletKubeconfigPath once its certificate is
// signed.
func KubeletUnit(in KubeletUnitInput) ([]byte, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	bin := runtimeBinaries[in.Runtime]
	run := [][]string{
		{bin, "run", "--rm", "--name", "kubelet"},
		{"--privileged", "--pid", "host", "--network", "host"},
	}
	for _, m := range kubeletMounts {
		run = append(run, []string{"--volume", m})
	}
	run = append(run,
		[]string{"${" + KubeletImageVariable + "}", "kubelet"},
		[]string{"--config=" + KubeletConfigPath},
		[]string{"--kubeconfig=" + KubeletKubeconfigPath},
		[]string{"--bootstrap-kubeconfig=" + BootstrapKubeconfigPath},
		[]string{"--hostname-override=" + in.Node},
	)
	if in.NodeIP != "" {
		run = append(run, []string{"--node-ip=" + in.NodeIP})
	}
	if len(in.NodeLabels) > 0 {
		run = append(run, []string{"--node-labels=" + strings.Join(in.NodeLabels, ",")})
	}
	if len(in.NodeTaints) > 0 {
		run = append(run, []string{"--register-with-taints=" + strings.Join(in.NodeTaints, ",")})
	}
	opts := []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "Kubelet (system container)"),
	}
	opts = append(opts, networkAndRuntime(in.Runtime)...)
	opts = append(opts,
		unit.NewUnitOption("Service", "Environment", KubeletImageVariable+"="+in.Image),
		unit.NewUnitOption("Service", "ExecStartPre", "/bin/mkdir -p "+ManifestsDir+" "+KubeletDir+" "+PodLogDir),
		// A kubelet container left by a crash would block the name.
		unit.NewUnitOption("Service", "ExecStartPre", "-"+bin+" rm --force kubelet"),
		unit.NewUnitOption("Service", "ExecStart", commandLine(run)),
		unit.NewUnitOption("Service", "ExecStop", "-"+bin+" stop kubelet"),
		unit.NewUnitOption("Service", "Restart", "always"),
		unit.NewUnitOption("Service", "RestartSec", "5"),
		unit.NewUnitOption("Install", "WantedBy", "multi-user.target"),
	)
	return serializeUnit(opts)
}

// DeleteNodeUnit renders delete-node.service (seed 000): on shutdown it
// deletes the node's Node object with kubectl from the kubelet image,
// authenticated by the kubelet's own kubeconfig (NodeRestriction lets a
// kubelet delete its own Node and no other). node is the node's name in the
// cluster, as given to the kubelet (--hostname-override); it need not be
// the host name.
//
// The unit is "active" from boot (ExecStart does nothing) so that systemd
// runs its ExecStop on the way down, while the network and the runtime are
// still up.
func DeleteNodeUnit(runtime, image, node string) ([]byte, error) {
	var p problems
	checkRuntime(&p, "runtime", runtime)
	checkImage(&p, "image", image)
	checkDNSName(&p, "node", node)
	if err := p.err(); err != nil {
		return nil, err
	}
	bin := runtimeBinaries[runtime]
	stop := [][]string{
		{bin, "run", "--rm", "--network", "host"},
		{"--volume", KubeletDir + ":" + KubeletDir + ":ro"},
		{"--entrypoint", "kubectl", "${" + KubeletImageVariable + "}"},
		{"--kubeconfig=" + KubeletKubeconfigPath},
		{"delete", "node", node, "--ignore-not-found"},
	}
	opts := []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "Delete Node "+node+" from the cluster on shutdown"),
	}
	opts = append(opts, networkAndRuntime(runtime)...)
	opts = append(opts,
		unit.NewUnitOption("Service", "Type", "oneshot"),
		unit.NewUnitOption("Service", "RemainAfterExit", "true"),
		unit.NewUnitOption("Service", "Environment", KubeletImageVariable+"="+image),
		unit.NewUnitOption("Service", "ExecStart", "/bin/true"),
		unit.NewUnitOption("Service", "ExecStop", commandLine(stop)),
		unit.NewUnitOption("Install", "WantedBy", "multi-user.target"),
	)
	return serializeUnit(opts)
}

// networkAndRuntime orders a unit after the network is up and, with
// docker, after (and stopping before) the docker daemon.
func networkAndRuntime(runtime string) []*unit.UnitOption {
	opts := []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Wants", "network-online.target"),
		unit.NewUnitOption("Unit", "After", "network-online.target"),
	}
	if runtime == RuntimeDocker {
		opts = append(opts,
			unit.NewUnitOption("Unit", "Requires", "docker.service"),
			unit.NewUnitOption("Unit", "After", "docker.service"),
		)
	}
	return opts
}

// commandLine writes a command one group of arguments a line, joined with
// systemd's line continuation. Every word comes from validated input: none
// holds a space, quote, backslash or specifier.
func commandLine(lines [][]string) string {
	parts := make([]string, len(lines))
	for i, words := range lines {
		parts[i] = strings.Join(words, " ")
	}
	return strings.Join(parts, " \\\n    ")
}

func serializeUnit(opts []*unit.UnitOption) ([]byte, error) {
	out, err := io.ReadAll(unit.Serialize(opts))
	if err != nil {
		return nil, fmt.Errorf("render unit: %w", err)
	}
	return append([]byte(header), out...), nil
}
