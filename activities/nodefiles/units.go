package nodefiles

import (
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"kedge.dev/kedge/actions/render"
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

// The label each node registers with for its role (--node-labels), as
// Typhoon's nodes do: the kubelet may set node.kubernetes.io/ labels, not
// node-role.kubernetes.io/ ones, which are left to the runbooks
// (kube.label-taint).
const (
	ControllerLabel = "node.kubernetes.io/controller=true"
	WorkerLabel     = "node.kubernetes.io/node"
)

func validateKubeletUnit(in render.KubeletUnitInput) error {
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
	if !KubeletMaySetLabel(key) {
		p.add(field, "the kubelet may not set %q: under kubernetes.io and k8s.io it may only set node.kubernetes.io/ and kubelet.kubernetes.io/ labels", key)
	}
}

// KubeletMaySetLabel reports whether a kubelet may register its Node with
// a label of this key (--node-labels): under the kubernetes.io and k8s.io
// namespaces only node.kubernetes.io/ and kubelet.kubernetes.io/ keys
// (node-role.kubernetes.io/ is for the cluster admin to set).
func KubeletMaySetLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	inNamespace := func(domain, ns string) bool { return domain == ns || strings.HasSuffix(domain, "."+ns) }
	return !(inNamespace(prefix, "kubernetes.io") || inNamespace(prefix, "k8s.io")) ||
		inNamespace(prefix, "node.kubernetes.io") || inNamespace(prefix, "kubelet.kubernetes.io")
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

// kubeletMounts are the host paths the kubelet container sees, as
// Typhoon's kubelet units mount them (seeds 000, 003): the CNI config
// read-only and the CNI plugins (the runtime calls them, the kubelet reads
// the config), its own config read-only, the host's identity and kernel
// modules read-only, /run (the runtime's socket), the cgroup tree it
// manages, the runtime's state, its own state with mount propagation so
// pod volumes it mounts reach the runtime, and logs. podman on Fedora
// CoreOS also gets SELinux and /var/run/lock, and relabels the paths it
// shares with containers (z).
func kubeletMounts(runtime string) []string {
	z := func(opts string) string { return opts }
	if runtime == RuntimePodman {
		z = func(opts string) string {
			if opts == "" {
				return ":z"
			}
			return opts + ",z"
		}
	}
	mounts := []string{
		CNIConfDir + ":" + CNIConfDir + z(":ro"),
		KubernetesDir + ":" + KubernetesDir + z(":ro"),
		// /etc/os-release is a link into /usr/lib on both distributions.
		"/usr/lib/os-release:/etc/os-release:ro",
		"/etc/machine-id:/etc/machine-id:ro",
		"/lib/modules:/lib/modules:ro",
		"/run:/run",
		"/sys/fs/cgroup:/sys/fs/cgroup",
	}
	if runtime == RuntimePodman {
		mounts = append(mounts, "/etc/selinux:/etc/selinux", "/sys/fs/selinux:/sys/fs/selinux")
	}
	mounts = append(mounts,
		"/var/lib/containerd:/var/lib/containerd",
		KubeletDir+":"+KubeletDir+z(":rshared"),
		"/var/log:/var/log",
	)
	if runtime == RuntimePodman {
		mounts = append(mounts, "/var/run/lock:/var/run/lock"+z(""))
	}
	return append(mounts, CNIBinDir+":"+CNIBinDir+z(""))
}

// KubeletUnit renders kubelet.service (seed 000): the kubelet runs as a
// privileged container of ${KUBELET_IMAGE} started by an inline ExecStart,
// so a drop-in setting KUBELET_IMAGE swaps the image. The image's
// entrypoint is the kubelet, so only flags follow the image. It joins the
// cluster through TLS bootstrap: BootstrapKubeconfigPath holds a bootstrap
// token, and the kubelet writes KubeletKubeconfigPath once its certificate
// is signed. The node registers with its role's label and NodeLabels
// (--node-labels, one flag each, as Typhoon writes them); its taints are
// the KubeletConfiguration's registerWithTaints. Host-specific settings
// are the host's own drop-ins in KubeletConfigDropInDir (--config-dir).
func KubeletUnit(in render.KubeletUnitInput) ([]byte, error) {
	if err := validateKubeletUnit(in); err != nil {
		return nil, err
	}
	bin := runtimeBinaries[in.Runtime]
	run := [][]string{
		{bin, "run", "--rm", "--name", "kubelet"},
		{"--privileged", "--pid", "host", "--network", "host"},
	}
	for _, m := range kubeletMounts(in.Runtime) {
		run = append(run, []string{"--volume", m})
	}
	run = append(run,
		[]string{"${" + KubeletImageVariable + "}"},
		[]string{"--config=" + KubeletConfigPath},
		[]string{"--config-dir=" + KubeletConfigDropInDir},
		[]string{"--kubeconfig=" + KubeletKubeconfigPath},
		[]string{"--bootstrap-kubeconfig=" + BootstrapKubeconfigPath},
		[]string{"--hostname-override=" + in.Node},
	)
	if in.NodeIP != "" {
		run = append(run, []string{"--node-ip=" + in.NodeIP})
	}
	roleLabel := WorkerLabel
	if in.Role == RoleController {
		roleLabel = ControllerLabel
	}
	for _, l := range append([]string{roleLabel}, in.NodeLabels...) {
		run = append(run, []string{"--node-labels=" + l})
	}
	opts := []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "Kubelet (system container)"),
	}
	opts = append(opts, networkAndRuntime(in.Runtime)...)
	opts = append(opts,
		unit.NewUnitOption("Service", "Environment", KubeletImageVariable+"="+in.Image),
		// podman refuses to mount a path that does not exist.
		unit.NewUnitOption("Service", "ExecStartPre", "/bin/mkdir -p "+strings.Join([]string{ManifestsDir, KubeletConfigDropInDir, KubeletDir, PodLogDir, CNIConfDir, CNIBinDir, "/var/lib/containerd"}, " ")),
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
