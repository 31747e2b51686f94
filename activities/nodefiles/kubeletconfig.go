package nodefiles

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/actions/render"
)

// Cgroup drivers the kubelet accepts; the container runtime must use the
// same one (seed 000: cgroupfs on older Flatcar, systemd elsewhere).
const (
	CgroupDriverSystemd  = "systemd"
	CgroupDriverCgroupfs = "cgroupfs"
)

// Defaults of KubeletConfigInput.
const (
	DefaultClusterDomain            = "cluster.local"
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
)

// ControllerTaint keeps workloads off controllers from the moment they
// register; bootstrap applies the same taint again as a reconcile.
const ControllerTaint = "node-role.kubernetes.io/controller:NoSchedule"

// How long the kubelet holds a host's shutdown to stop its pods, and how
// much of it is kept for critical pods (Typhoon's values). The host's
// logind must allow an inhibitor delay at least as long
// (InhibitDelayMaxSec).
const (
	ShutdownGracePeriod             = 45 * time.Second
	ShutdownGracePeriodCriticalPods = 30 * time.Second
)

func kubeletConfigWithDefaults(in render.KubeletConfigInput) render.KubeletConfigInput {
	if in.ClusterDomain == "" {
		in.ClusterDomain = DefaultClusterDomain
	}
	if in.CgroupDriver == "" {
		in.CgroupDriver = CgroupDriverSystemd
	}
	if in.FailSwapOn == nil {
		in.FailSwapOn = ptr.To(true)
	}
	if in.ContainerRuntimeEndpoint == "" {
		in.ContainerRuntimeEndpoint = DefaultContainerRuntimeEndpoint
	}
	if in.ResolvConf == "" {
		in.ResolvConf = SystemdResolvConf
	}
	return in
}

func validateKubeletConfig(in render.KubeletConfigInput) error {
	var p problems
	if len(in.ClusterDNS) == 0 {
		p.add("clusterDNS", "at least one IP is required")
	}
	for i, ip := range in.ClusterDNS {
		checkIP(&p, fmt.Sprintf("clusterDNS[%d]", i), ip)
	}
	checkDNSName(&p, "clusterDomain", in.ClusterDomain)
	if in.CgroupDriver != CgroupDriverSystemd && in.CgroupDriver != CgroupDriverCgroupfs {
		p.add("cgroupDriver", "%q is not a cgroup driver (want %s)", in.CgroupDriver, quoteList(CgroupDriverSystemd, CgroupDriverCgroupfs))
	}
	if u, err := url.Parse(in.ContainerRuntimeEndpoint); err != nil || u.Scheme != "unix" || u.Host != "" || !path.IsAbs(u.Path) {
		p.add("containerRuntimeEndpoint", "%q is not a unix socket URL (unix:///path)", in.ContainerRuntimeEndpoint)
	}
	if !path.IsAbs(in.ResolvConf) {
		p.add("resolvConf", "%q is not an absolute path", in.ResolvConf)
	}
	switch in.Role {
	case "", RoleWorker:
	case RoleController:
		if len(in.NodeTaints) > 0 {
			p.add("nodeTaints", "only workers take initial taints; a controller registers with %s", ControllerTaint)
		}
	default:
		p.add("role", "%q is not a role (want %s)", in.Role, quoteList(RoleController, RoleWorker))
	}
	seen := map[string]bool{}
	for i, t := range in.NodeTaints {
		field := fmt.Sprintf("nodeTaints[%d]", i)
		checkTaint(&p, field, t)
		// The kubelet refuses a key and effect given twice.
		if taint, ok := parseTaint(t); ok {
			id := taint.Key + ":" + string(taint.Effect)
			if seen[id] {
				p.add(field, "taint %s is given twice", id)
			}
			seen[id] = true
		}
	}
	return p.err()
}

// parseTaint reads key[=value]:Effect; ok is false when it is not of that
// shape (checkTaint says why).
func parseTaint(s string) (corev1.Taint, bool) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, false
	}
	key, value, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, true
}

// registerWithTaints are the taints a node of the input registers with.
func registerWithTaints(in render.KubeletConfigInput) []corev1.Taint {
	specs := in.NodeTaints
	if in.Role == RoleController {
		specs = []string{ControllerTaint}
	}
	var taints []corev1.Taint
	for _, s := range specs {
		t, _ := parseTaint(s)
		taints = append(taints, t)
	}
	return taints
}

// kubeletConfiguration builds the typed configuration KubeletConfig renders.
func kubeletConfiguration(in render.KubeletConfigInput) (*kubeletv1beta1.KubeletConfiguration, error) {
	in = kubeletConfigWithDefaults(in)
	if err := validateKubeletConfig(in); err != nil {
		return nil, err
	}
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{
			APIVersion: kubeletv1beta1.SchemeGroupVersion.String(),
			Kind:       "KubeletConfiguration",
		},
		StaticPodPath: ManifestsDir,
		ClusterDNS:    append([]string(nil), in.ClusterDNS...),
		ClusterDomain: in.ClusterDomain,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: ClusterCAPath},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{
			Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook,
		},
		ReadOnlyPort:                    0,
		RotateCertificates:              true,
		ServerTLSBootstrap:              false,
		CgroupDriver:                    in.CgroupDriver,
		FailSwapOn:                      in.FailSwapOn,
		HealthzBindAddress:              "127.0.0.1",
		ContainerRuntimeEndpoint:        in.ContainerRuntimeEndpoint,
		ResolverConfig:                  ptr.To(in.ResolvConf),
		RegisterWithTaints:              registerWithTaints(in),
		ShutdownGracePeriod:             metav1.Duration{Duration: ShutdownGracePeriod},
		ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: ShutdownGracePeriodCriticalPods},
	}, nil
}

// KubeletConfig renders the kubelet's configuration file (KubeletConfigPath,
// seed 004: a typed KubeletConfiguration instead of flags): static pods from
// ManifestsDir; clients authenticated by certificates of the cluster CA or
// by the API server (webhook), never anonymously, and authorized by the API
// server; no read-only port; client certificates rotated; healthz on
// localhost only; the host's systemd-resolved upstreams for DNS; a
// graceful node shutdown; the role's taints at registration.
//
// Settings left at the kubelet's defaults are not written, except the ones
// a reader checks for (readOnlyPort: 0, serverTLSBootstrap: false), which
// are written explicitly.
func KubeletConfig(in render.KubeletConfigInput) ([]byte, error) {
	cfg, err := kubeletConfiguration(in)
	if err != nil {
		return nil, err
	}
	m, err := toMap(cfg)
	if err != nil {
		return nil, err
	}
	// The type's JSON form writes every duration it has, as 0s when unset,
	// and an all-zero logging block: noise that reads like settings.
	delete(m, "logging")
	pruneUnset(m)
	m["readOnlyPort"] = 0
	m["serverTLSBootstrap"] = false
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("render kubelet config: %w", err)
	}
	return append([]byte(header), out...), nil
}

// pruneUnset removes from a JSON object, recursively, the strings that mean
// "unset" ("" and the zero duration "0s") and the objects left empty.
// Numbers and booleans stay: a false or a 0 may be a setting.
func pruneUnset(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case string:
			if v == "" || v == "0s" {
				delete(m, k)
			}
		case map[string]any:
			pruneUnset(v)
			if len(v) == 0 {
				delete(m, k)
			}
		}
	}
}
