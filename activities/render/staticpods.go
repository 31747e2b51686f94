package render

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults of ControlPlaneInput.
const (
	DefaultAPIServerPort        = 6443
	DefaultServiceAccountIssuer = "https://kubernetes.default.svc"
)

// Ports the control plane listens on besides the API server's.
const (
	EtcdClientPort        = 2379
	EtcdPeerPort          = 2380
	EtcdMetricsPort       = 2381 // http on 127.0.0.1: /metrics, /livez, /readyz
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// RestartAnnotation carries ControlPlaneInput.Certificates.
const RestartAnnotation = "kedge.dev/certificates"

func controlPlaneWithDefaults(in ControlPlaneInput) ControlPlaneInput {
	if len(in.EtcdMembers) == 0 {
		in.EtcdMembers = []EtcdMember{{Name: in.Node, IP: in.NodeIP}}
	}
	if in.EtcdInitialClusterState == "" {
		in.EtcdInitialClusterState = "new"
	}
	if in.ServiceAccountIssuer == "" {
		in.ServiceAccountIssuer = DefaultServiceAccountIssuer
	}
	if in.APIServerPort == 0 {
		in.APIServerPort = DefaultAPIServerPort
	}
	return in
}

func validateControlPlane(in ControlPlaneInput) error {
	var p problems
	checkDNSName(&p, "node", in.Node)
	checkIP(&p, "nodeIP", in.NodeIP)
	names, ips := map[string]bool{}, map[string]bool{}
	self := false
	for i, m := range in.EtcdMembers {
		field := fmt.Sprintf("etcdMembers[%d]", i)
		checkDNSName(&p, field+".name", m.Name)
		checkIP(&p, field+".ip", m.IP)
		if names[m.Name] {
			p.add(field+".name", "%q is given twice", m.Name)
		}
		if ips[m.IP] {
			p.add(field+".ip", "%q is given twice", m.IP)
		}
		names[m.Name], ips[m.IP] = true, true
		if m.Name == in.Node {
			self = true
			if m.IP != in.NodeIP {
				p.add(field+".ip", "%q is not nodeIP %q, yet the member is this node", m.IP, in.NodeIP)
			}
		}
	}
	if !self {
		p.add("etcdMembers", "node %q is not one of the members", in.Node)
	}
	if s := in.EtcdInitialClusterState; s != "new" && s != "existing" {
		p.add("etcdInitialClusterState", "%q is not a cluster state (want %s)", s, quoteList("new", "existing"))
	}
	checkCIDR(&p, "serviceCIDR", in.ServiceCIDR)
	if in.PodCIDR != "" {
		checkCIDR(&p, "podCIDR", in.PodCIDR)
	}
	checkServerURL(&p, "serviceAccountIssuer", in.ServiceAccountIssuer)
	if in.APIServerPort < 1 || in.APIServerPort > 65535 {
		p.add("apiServerPort", "%d is not a port", in.APIServerPort)
	}
	checkImage(&p, "images.etcd", in.Images.Etcd)
	checkImage(&p, "images.apiServer", in.Images.APIServer)
	checkImage(&p, "images.controllerManager", in.Images.ControllerManager)
	checkImage(&p, "images.scheduler", in.Images.Scheduler)
	return p.err()
}

// StaticPods renders the control plane's static pod manifests, keyed by
// their file names in ManifestsDir: etcd.yaml, kube-apiserver.yaml,
// kube-controller-manager.yaml and kube-scheduler.yaml.
//
// Every component runs on the host network at system-node-critical
// priority with its files mounted read-only from PKIDir (kubeadm's layout,
// see PKIDir and EtcdPKIDir) and its kubeconfig from KubernetesDir. etcd
// speaks TLS to clients and peers and requires client certificates issued
// by etcd's own CA (EtcdPKIDir/ca.crt), never the cluster CA that signs
// kubelet certificates: etcd mounts EtcdPKIDir alone, and the API server
// reaches it with apiserver-etcd-client.crt from etcd's CA. The API
// server authorizes with Node,RBAC, admits with NodeRestriction and accepts
// bootstrap tokens; the controller manager signs kubelet certificates with
// the cluster CA and runs the bootstrap signer and token cleaner.
//
// The certificates must name what the components are reached by: the etcd
// server certificate each node IP and 127.0.0.1, the API server's the node
// IPs, the first IP of serviceCIDR and kubernetes.default.svc.
func StaticPods(in ControlPlaneInput) (map[string][]byte, error) {
	in = controlPlaneWithDefaults(in)
	if err := validateControlPlane(in); err != nil {
		return nil, err
	}
	pods := []*corev1.Pod{etcdPod(in), apiServerPod(in), controllerManagerPod(in), schedulerPod(in)}
	out := make(map[string][]byte, len(pods))
	for _, pod := range pods {
		if in.Certificates != "" {
			pod.Annotations = map[string]string{RestartAnnotation: in.Certificates}
		}
		data, err := toYAML(pod)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pod.Name, err)
		}
		out[pod.Name+".yaml"] = data
	}
	return out, nil
}

func pki(name string) string     { return path.Join(PKIDir, name) }
func etcdPKI(name string) string { return path.Join(EtcdPKIDir, name) }

func endpoint(scheme, ip string, port int) string {
	return scheme + "://" + net.JoinHostPort(ip, strconv.Itoa(port))
}

func etcdPod(in ControlPlaneInput) *corev1.Pod {
	var cluster []string
	for _, m := range in.EtcdMembers {
		cluster = append(cluster, m.Name+"="+endpoint("https", m.IP, EtcdPeerPort))
	}
	command := []string{
		"etcd",
		"--name=" + in.Node,
		"--data-dir=" + EtcdDataDir,
		"--listen-client-urls=" + endpoint("https", "127.0.0.1", EtcdClientPort) + "," + endpoint("https", in.NodeIP, EtcdClientPort),
		"--advertise-client-urls=" + endpoint("https", in.NodeIP, EtcdClientPort),
		"--listen-peer-urls=" + endpoint("https", in.NodeIP, EtcdPeerPort),
		"--initial-advertise-peer-urls=" + endpoint("https", in.NodeIP, EtcdPeerPort),
		"--initial-cluster=" + strings.Join(cluster, ","),
		"--initial-cluster-state=" + in.EtcdInitialClusterState,
		"--listen-metrics-urls=" + endpoint("http", "127.0.0.1", EtcdMetricsPort),
		"--client-cert-auth=true",
		"--trusted-ca-file=" + etcdPKI("ca.crt"),
		"--cert-file=" + etcdPKI("server.crt"),
		"--key-file=" + etcdPKI("server.key"),
		"--peer-client-cert-auth=true",
		"--peer-trusted-ca-file=" + etcdPKI("ca.crt"),
		"--peer-cert-file=" + etcdPKI("peer.crt"),
		"--peer-key-file=" + etcdPKI("peer.key"),
	}
	return staticPod(component{
		name:     "etcd",
		image:    in.Images.Etcd,
		command:  command,
		cpu:      "100m",
		memory:   "100Mi",
		liveness: httpGet("127.0.0.1", "/livez", EtcdMetricsPort, corev1.URISchemeHTTP),
		startup:  httpGet("127.0.0.1", "/readyz", EtcdMetricsPort, corev1.URISchemeHTTP),
		volumes: []hostVolume{
			{name: "etcd-data", path: EtcdDataDir, kind: corev1.HostPathDirectoryOrCreate},
			{name: "etcd-pki", path: EtcdPKIDir, kind: corev1.HostPathDirectory, readOnly: true},
		},
	})
}

func apiServerPod(in ControlPlaneInput) *corev1.Pod {
	var etcdServers []string
	for _, m := range in.EtcdMembers {
		etcdServers = append(etcdServers, endpoint("https", m.IP, EtcdClientPort))
	}
	command := []string{
		"kube-apiserver",
		"--advertise-address=" + in.NodeIP,
		"--secure-port=" + strconv.Itoa(in.APIServerPort),
		"--allow-privileged=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth=true",
		"--client-ca-file=" + pki("ca.crt"),
		"--tls-cert-file=" + pki("apiserver.crt"),
		"--tls-private-key-file=" + pki("apiserver.key"),
		"--etcd-servers=" + strings.Join(etcdServers, ","),
		"--etcd-cafile=" + etcdPKI("ca.crt"),
		"--etcd-certfile=" + pki("apiserver-etcd-client.crt"),
		"--etcd-keyfile=" + pki("apiserver-etcd-client.key"),
		"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--service-account-issuer=" + in.ServiceAccountIssuer,
		"--service-account-key-file=" + pki("sa.pub"),
		"--service-account-signing-key-file=" + pki("sa.key"),
		"--service-cluster-ip-range=" + in.ServiceCIDR,
	}
	return staticPod(component{
		name:      "kube-apiserver",
		image:     in.Images.APIServer,
		command:   command,
		cpu:       "150m",
		liveness:  httpGet(in.NodeIP, "/livez", in.APIServerPort, corev1.URISchemeHTTPS),
		readiness: readiness(httpGet(in.NodeIP, "/readyz", in.APIServerPort, corev1.URISchemeHTTPS)),
		startup:   httpGet(in.NodeIP, "/livez", in.APIServerPort, corev1.URISchemeHTTPS),
		volumes: []hostVolume{
			{name: "pki", path: PKIDir, kind: corev1.HostPathDirectory, readOnly: true},
		},
	})
}

func controllerManagerPod(in ControlPlaneInput) *corev1.Pod {
	command := []string{
		"kube-controller-manager",
		"--kubeconfig=" + ControllerManagerKubeconfigPath,
		"--authentication-kubeconfig=" + ControllerManagerKubeconfigPath,
		"--authorization-kubeconfig=" + ControllerManagerKubeconfigPath,
		"--bind-address=127.0.0.1",
		"--leader-elect=true",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file=" + pki("ca.crt"),
		"--cluster-signing-key-file=" + pki("ca.key"),
		"--root-ca-file=" + pki("ca.crt"),
		"--service-account-private-key-file=" + pki("sa.key"),
		"--service-cluster-ip-range=" + in.ServiceCIDR,
	}
	if in.PodCIDR != "" {
		command = append(command, "--allocate-node-cidrs=true", "--cluster-cidr="+in.PodCIDR)
	}
	return staticPod(component{
		name:     "kube-controller-manager",
		image:    in.Images.ControllerManager,
		command:  command,
		cpu:      "150m",
		liveness: httpGet("127.0.0.1", "/healthz", ControllerManagerPort, corev1.URISchemeHTTPS),
		startup:  httpGet("127.0.0.1", "/healthz", ControllerManagerPort, corev1.URISchemeHTTPS),
		volumes: []hostVolume{
			{name: "pki", path: PKIDir, kind: corev1.HostPathDirectory, readOnly: true},
			{name: "kubeconfig", path: ControllerManagerKubeconfigPath, kind: corev1.HostPathFile, readOnly: true},
		},
	})
}

func schedulerPod(in ControlPlaneInput) *corev1.Pod {
	command := []string{
		"kube-scheduler",
		"--kubeconfig=" + SchedulerKubeconfigPath,
		"--authentication-kubeconfig=" + SchedulerKubeconfigPath,
		"--authorization-kubeconfig=" + SchedulerKubeconfigPath,
		"--bind-address=127.0.0.1",
		"--leader-elect=true",
	}
	return staticPod(component{
		name:     "kube-scheduler",
		image:    in.Images.Scheduler,
		command:  command,
		cpu:      "100m",
		liveness: httpGet("127.0.0.1", "/healthz", SchedulerPort, corev1.URISchemeHTTPS),
		startup:  httpGet("127.0.0.1", "/healthz", SchedulerPort, corev1.URISchemeHTTPS),
		volumes: []hostVolume{
			{name: "kubeconfig", path: SchedulerKubeconfigPath, kind: corev1.HostPathFile, readOnly: true},
		},
	})
}

// component is what differs between the control-plane static pods.
type component struct {
	name, image                  string
	command                      []string
	cpu, memory                  string // requests; memory optional
	liveness, readiness, startup *corev1.Probe
	volumes                      []hostVolume
}

// hostVolume is a host path mounted at the same path in the container.
type hostVolume struct {
	name, path string
	kind       corev1.HostPathType
	readOnly   bool
}

func staticPod(c component) *corev1.Pod {
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c.cpu)}
	if c.memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(c.memory)
	}
	if c.startup != nil {
		// Give a slow first start (etcd replaying its log, the API
		// server filling its caches) four minutes before liveness counts.
		c.startup.FailureThreshold = 24
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, v := range c.volumes {
		volumes = append(volumes, corev1.Volume{
			Name:         v.name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: v.path, Type: &v.kind}},
		})
		mounts = append(mounts, corev1.VolumeMount{Name: v.name, MountPath: v.path, ReadOnly: v.readOnly})
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      c.name,
			Namespace: metav1.NamespaceSystem,
			Labels:    map[string]string{"component": c.name, "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            c.name,
				Image:           c.image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         c.command,
				Resources:       corev1.ResourceRequirements{Requests: requests},
				LivenessProbe:   c.liveness,
				ReadinessProbe:  c.readiness,
				StartupProbe:    c.startup,
				VolumeMounts:    mounts,
			}},
			Volumes: volumes,
		},
	}
}

// readiness makes a probe answer within seconds: readiness takes a pod out
// of service, it does not restart it.
func readiness(p *corev1.Probe) *corev1.Probe {
	p.InitialDelaySeconds, p.PeriodSeconds, p.FailureThreshold = 0, 1, 3
	return p
}

// httpGet probes a component's health endpoint every ten seconds, failing
// after eight misses.
func httpGet(host, path string, port int, scheme corev1.URIScheme) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host:   host,
			Path:   path,
			Port:   intstr.FromInt32(int32(port)),
			Scheme: scheme,
		}},
		InitialDelaySeconds: 10,
		TimeoutSeconds:      15,
		PeriodSeconds:       10,
		FailureThreshold:    8,
	}
}
