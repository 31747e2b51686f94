package nodefiles

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kedge.dev/kedge/actions/render"
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
	EtcdMetricsPort       = 2381 // http on 127.0.0.1 (see ListenNode): /metrics, /livez, /readyz
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// What the control plane's listeners bind (ControlPlaneInput.Listen).
const (
	// ListenKubeadm is kubeadm's layout: the API server on every address,
	// etcd's clients on 127.0.0.1 and the node's address, etcd's metrics,
	// the controller manager and the scheduler on 127.0.0.1.
	ListenKubeadm = "kubeadm"
	// ListenNode binds every listener to the node's own address, never
	// 127.0.0.1 or every address: nothing on another address (a second
	// interface, a VPN, a container sharing the host's loopback) reaches
	// the control plane, and several control planes can share a network
	// namespace, each on its own address.
	ListenNode = "node"
)

func controlPlaneWithDefaults(in render.ControlPlaneInput) render.ControlPlaneInput {
	if in.EtcdInitialCluster != "" {
		in.EtcdMembers, _ = initialCluster(&problems{}, in.EtcdInitialCluster) // checked by validateControlPlane
	}
	if len(in.EtcdMembers) == 0 {
		in.EtcdMembers = []render.EtcdMember{{Name: in.Node, IP: in.NodeIP}}
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
	if in.Listen == "" {
		in.Listen = ListenKubeadm
	}
	return in
}

func validateControlPlane(in render.ControlPlaneInput) error {
	var p problems
	checkDNSName(&p, "node", in.Node)
	checkIP(&p, "nodeIP", in.NodeIP)
	members, field := in.EtcdMembers, "etcdMembers"
	var at []int // the members' items in etcdInitialCluster
	if in.EtcdInitialCluster != "" {
		members, at = initialCluster(&p, in.EtcdInitialCluster)
		field = "etcdInitialCluster"
	}
	names, ips := map[string]bool{}, map[string]bool{}
	self := false
	for i, m := range members {
		if at != nil {
			i = at[i]
		}
		field := fmt.Sprintf("%s[%d]", field, i)
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
	if !self && len(members) > 0 {
		p.add(field, "node %q is not one of the members", in.Node)
	}
	if s := in.EtcdInitialClusterState; s != "new" && s != "existing" {
		p.add("etcdInitialClusterState", "%q is not a cluster state (want %s)", s, quoteList("new", "existing"))
	}
	if l := in.Listen; l != ListenKubeadm && l != ListenNode {
		p.add("listen", "%q is not a listen mode (want %s)", l, quoteList(ListenKubeadm, ListenNode))
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
func StaticPods(in render.ControlPlaneInput) (map[string][]byte, error) {
	in = controlPlaneWithDefaults(in)
	if err := validateControlPlane(in); err != nil {
		return nil, err
	}
	pods := []*corev1.Pod{etcdPod(in), apiServerPod(in), controllerManagerPod(in), schedulerPod(in)}
	out := make(map[string][]byte, len(pods))
	for _, pod := range pods {
		if in.Certificates != "" {
			pod.Annotations = map[string]string{render.CertificatesAnnotation: in.Certificates}
		}
		data, err := toYAML(pod)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pod.Name, err)
		}
		out[pod.Name+".yaml"] = data
	}
	return out, nil
}

// initialCluster reads etcd's initial cluster as etcd's member add gives
// it ("name=https://IP:2380,..."), each item that is not a member of
// this layout (its peer URL https on the peer port, at an IP) a problem;
// at gives each member's item.
func initialCluster(p *problems, s string) (members []render.EtcdMember, at []int) {
	for i, item := range strings.Split(s, ",") {
		field := fmt.Sprintf("etcdInitialCluster[%d]", i)
		name, peer, ok := strings.Cut(item, "=")
		if !ok {
			p.add(field, "%q is not NAME=https://IP:%d", item, EtcdPeerPort)
			continue
		}
		u, err := url.Parse(peer)
		if err != nil || u.Scheme != "https" || u.Port() != strconv.Itoa(EtcdPeerPort) || net.ParseIP(u.Hostname()) == nil ||
			(u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
			p.add(field, "%q is not a peer URL https://IP:%d", peer, EtcdPeerPort)
			continue
		}
		members, at = append(members, render.EtcdMember{Name: name, IP: u.Hostname()}), append(at, i)
	}
	return members, at
}

func pki(name string) string     { return path.Join(PKIDir, name) }
func etcdPKI(name string) string { return path.Join(EtcdPKIDir, name) }

// local is the address the listeners that kubeadm binds to loopback bind:
// 127.0.0.1, or the node's own with ListenNode.
func local(in render.ControlPlaneInput) string {
	if in.Listen == ListenNode {
		return in.NodeIP
	}
	return "127.0.0.1"
}

// etcdClientURLs are the URLs etcd serves its clients on: 127.0.0.1 and
// the node's address, or the node's alone with ListenNode.
func etcdClientURLs(in render.ControlPlaneInput) string {
	node := endpoint("https", in.NodeIP, EtcdClientPort)
	if in.Listen == ListenNode {
		return node
	}
	return endpoint("https", "127.0.0.1", EtcdClientPort) + "," + node
}

func endpoint(scheme, ip string, port int) string {
	return scheme + "://" + net.JoinHostPort(ip, strconv.Itoa(port))
}

func etcdPod(in render.ControlPlaneInput) *corev1.Pod {
	var cluster []string
	for _, m := range in.EtcdMembers {
		cluster = append(cluster, m.Name+"="+endpoint("https", m.IP, EtcdPeerPort))
	}
	command := []string{
		"etcd",
		"--name=" + in.Node,
		"--data-dir=" + EtcdDataDir,
		"--listen-client-urls=" + etcdClientURLs(in),
		"--advertise-client-urls=" + endpoint("https", in.NodeIP, EtcdClientPort),
		"--listen-peer-urls=" + endpoint("https", in.NodeIP, EtcdPeerPort),
		"--initial-advertise-peer-urls=" + endpoint("https", in.NodeIP, EtcdPeerPort),
		"--initial-cluster=" + strings.Join(cluster, ","),
		"--initial-cluster-state=" + in.EtcdInitialClusterState,
		"--listen-metrics-urls=" + endpoint("http", local(in), EtcdMetricsPort),
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
		liveness: httpGet(local(in), "/livez", EtcdMetricsPort, corev1.URISchemeHTTP),
		startup:  httpGet(local(in), "/readyz", EtcdMetricsPort, corev1.URISchemeHTTP),
		volumes: []hostVolume{
			{name: "etcd-data", path: EtcdDataDir, kind: corev1.HostPathDirectoryOrCreate},
			{name: "etcd-pki", path: EtcdPKIDir, kind: corev1.HostPathDirectory, readOnly: true},
		},
	})
}

func apiServerPod(in render.ControlPlaneInput) *corev1.Pod {
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
		// On SIGTERM, end the watches within 5 s and exit. Without it the
		// server waits for them until its 60 s shutdown timeout and the
		// kubelet kills it at the pod's grace period: every restart of a
		// renewal or rotation held the controller's API for 30 s more
		// (measured: exit 60 s after SIGTERM with a controller manager and a
		// scheduler watching; 1.1 s with this).
		"--shutdown-watch-termination-grace-period=5s",
	}
	if in.Listen == ListenNode {
		command = slices.Insert(command, 2, "--bind-address="+in.NodeIP)
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

func controllerManagerPod(in render.ControlPlaneInput) *corev1.Pod {
	command := []string{
		"kube-controller-manager",
		"--kubeconfig=" + ControllerManagerKubeconfigPath,
		"--authentication-kubeconfig=" + ControllerManagerKubeconfigPath,
		"--authorization-kubeconfig=" + ControllerManagerKubeconfigPath,
		"--bind-address=" + local(in),
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
		liveness: httpGet(local(in), "/healthz", ControllerManagerPort, corev1.URISchemeHTTPS),
		startup:  httpGet(local(in), "/healthz", ControllerManagerPort, corev1.URISchemeHTTPS),
		volumes: []hostVolume{
			{name: "pki", path: PKIDir, kind: corev1.HostPathDirectory, readOnly: true},
			{name: "kubeconfig", path: ControllerManagerKubeconfigPath, kind: corev1.HostPathFile, readOnly: true},
		},
	})
}

func schedulerPod(in render.ControlPlaneInput) *corev1.Pod {
	command := []string{
		"kube-scheduler",
		"--kubeconfig=" + SchedulerKubeconfigPath,
		"--authentication-kubeconfig=" + SchedulerKubeconfigPath,
		"--authorization-kubeconfig=" + SchedulerKubeconfigPath,
		"--bind-address=" + local(in),
		"--leader-elect=true",
	}
	return staticPod(component{
		name:     "kube-scheduler",
		image:    in.Images.Scheduler,
		command:  command,
		cpu:      "100m",
		liveness: httpGet(local(in), "/healthz", SchedulerPort, corev1.URISchemeHTTPS),
		startup:  httpGet(local(in), "/healthz", SchedulerPort, corev1.URISchemeHTTPS),
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
		// Asked every 2 s from the start, a restarted component is
		// Ready (and the rolling restart of a cert-renewal or a
		// ca-rotation goes on to the next one) within 2 s of answering,
		// not up to 20 s later as after kubeadm's 10 s delay and period;
		// a slow first start (etcd replaying its log, the API server
		// filling its caches) still gets four minutes before liveness
		// counts.
		c.startup.InitialDelaySeconds, c.startup.PeriodSeconds, c.startup.FailureThreshold = 0, 2, 120
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
