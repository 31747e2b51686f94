package nodefiles

// Where the rendered files live on a host. The renderers point the files at
// each other through these paths (the kubelet unit names the kubelet config,
// the static pods name the PKI), so whatever writes the files must use them
// too.
const (
	// KubernetesDir holds the files a node is given: kubelet config,
	// bootstrap kubeconfig, CA, and on controllers the PKI and the
	// control-plane kubeconfigs. The kubelet mounts it read-only.
	KubernetesDir = "/etc/kubernetes"
	// ManifestsDir is the kubelet's staticPodPath.
	ManifestsDir = "/etc/kubernetes/manifests"
	// KubeletConfigPath is the KubeletConfiguration file (KubeletConfig).
	KubeletConfigPath = "/etc/kubernetes/kubelet.yaml"
	// KubeletConfigDropInDir is the kubelet's --config-dir: the host's
	// own KubeletConfiguration drop-ins (*.conf, merged over
	// KubeletConfigPath in name order; GA in Kubernetes 1.35). Kedge never
	// writes there: it is where an operator or a machine's provisioning
	// puts what only that host needs (a cgroup driver, reserved
	// resources), and it survives Kedge rendering KubeletConfigPath again.
	KubeletConfigDropInDir = "/etc/kubernetes/kubelet.conf.d"
	// BootstrapKubeconfigPath is the kubeconfig holding a bootstrap token
	// (Kubeconfig with a token) the kubelet joins with.
	BootstrapKubeconfigPath = "/etc/kubernetes/bootstrap-kubeconfig"
	// ClusterCAPath is the cluster CA the kubelet verifies clients with.
	ClusterCAPath = "/etc/kubernetes/ca.crt"
	// KubeletDir is the kubelet's state: the kubeconfig it writes after TLS
	// bootstrap, its certificates, pod volumes.
	KubeletDir = "/var/lib/kubelet"
	// KubeletKubeconfigPath is the kubeconfig the kubelet writes once its
	// client certificate is issued.
	KubeletKubeconfigPath = "/var/lib/kubelet/kubeconfig"
	// PodLogDir is where the kubelet keeps container logs.
	PodLogDir = "/var/log/pods"
	// KubeletUnitPath is kubelet.service (KubeletUnit). Drop-ins go in
	// KubeletUnitPath + ".d".
	KubeletUnitPath = "/etc/systemd/system/kubelet.service"
	// CNIConfDir is where the container runtime finds its CNI network
	// config; the node stays NotReady until one is there.
	CNIConfDir = "/etc/cni/net.d"
	// CNIBinDir holds the CNI plugins (bridge, host-local, portmap).
	CNIBinDir = "/opt/cni/bin"
	// BridgeCNIConfigPath is the bridge network's config (BridgeCNIConfig).
	BridgeCNIConfigPath = "/etc/cni/net.d/10-kedge-bridge.conflist"
	// SystemdResolvConf is the resolv.conf of a host that runs
	// systemd-resolved (Fedora CoreOS, Flatcar): the upstream servers,
	// not the 127.0.0.53 stub, which a pod cannot reach.
	SystemdResolvConf = "/run/systemd/resolve/resolv.conf"

	// PKIDir holds the control plane's certificates and keys (kubeadm's
	// layout): ca.crt/ca.key, apiserver.crt/.key,
	// apiserver-kubelet-client.crt/.key, apiserver-etcd-client.crt/.key,
	// sa.pub/sa.key.
	PKIDir = "/etc/kubernetes/pki"
	// EtcdPKIDir holds etcd's CA and its server and peer certificates:
	// ca.crt, server.crt/.key, peer.crt/.key.
	EtcdPKIDir = "/etc/kubernetes/pki/etcd"
	// EtcdDataDir is etcd's data directory.
	EtcdDataDir = "/var/lib/etcd"
	// ControllerManagerKubeconfigPath is kube-controller-manager's kubeconfig.
	ControllerManagerKubeconfigPath = "/etc/kubernetes/controller-manager.conf"
	// SchedulerKubeconfigPath is kube-scheduler's kubeconfig.
	SchedulerKubeconfigPath = "/etc/kubernetes/scheduler.conf"
)
