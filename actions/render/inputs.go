package render

// KubeconfigInput describes a kubeconfig with one cluster, one user and
// one context. The user authenticates EITHER with a bearer token (a
// bootstrap kubeconfig holds a bootstrap token, see NewBootstrapToken) OR
// with a client certificate and key; never both.
type KubeconfigInput struct {
	// ClusterName names the cluster entry.
	ClusterName string `json:"clusterName"`
	// Server is the API server's https:// URL.
	Server string `json:"server"`
	// CACert is the PEM of the CA(s) that sign the API server's
	// certificate, embedded as certificate-authority-data.
	CACert string `json:"caCert"`
	// User names the user entry. The context is named User@ClusterName.
	User string `json:"user"`
	// Token is a bearer token.
	Token string `json:"token,omitempty"`
	// ClientCert and ClientKey are the PEM of a client certificate and its
	// private key, embedded.
	ClientCert string `json:"clientCert,omitempty"`
	ClientKey  string `json:"clientKey,omitempty"`
}

// KubeletConfigInput is what varies between clusters' kubelet configs.
type KubeletConfigInput struct {
	// ClusterDNS are the IPs of the cluster DNS service, written into
	// every pod's resolv.conf. At least one.
	ClusterDNS []string `json:"clusterDNS"`
	// ClusterDomain is the cluster's DNS domain (default cluster.local).
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// CgroupDriver is "systemd" (default) or "cgroupfs".
	CgroupDriver string `json:"cgroupDriver,omitempty"`
	// FailSwapOn stops the kubelet from starting on a host with swap on
	// (default true).
	FailSwapOn *bool `json:"failSwapOn,omitempty"`
	// ContainerRuntimeEndpoint is the CRI socket (default
	// unix:///run/containerd/containerd.sock).
	ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint,omitempty"`
	// ResolvConf is the host's resolv.conf that pods with the Default DNS
	// policy, and the cluster DNS's upstreams, are given (default
	// /run/systemd/resolve/resolv.conf, for systemd-resolved hosts).
	ResolvConf string `json:"resolvConf,omitempty"`
	// Role is the node's role, "controller" or "worker": a controller
	// registers with ControllerTaint. Empty: no role taint.
	Role string `json:"role,omitempty"`
	// NodeTaints are key[=value]:Effect taints the node registers with
	// (registerWithTaints). Workers only.
	NodeTaints []string `json:"nodeTaints,omitempty"`
}

// KubeletUnitInput describes kubelet.service for one node.
type KubeletUnitInput struct {
	// Runtime runs the kubelet container: "docker" (Flatcar Linux) or
	// "podman" (Fedora CoreOS).
	Runtime string `json:"runtime"`
	// Image is the kubelet image, pinned by tag or digest. Its entrypoint
	// is the kubelet (quay.io/poseidon/kubelet): the unit passes flags
	// only, since the kubelet refuses positional arguments.
	Image string `json:"image"`
	// Node is the node's name in the cluster (--hostname-override).
	Node string `json:"node"`
	// Role is "controller" or "worker".
	Role string `json:"role"`
	// NodeIP is the address the node registers and serves on
	// (--node-ip); empty lets the kubelet pick one, which on a host with
	// several interfaces may be the wrong one.
	NodeIP string `json:"nodeIP,omitempty"`
	// NodeLabels are key=value labels the node registers with, after its
	// role's label (ControllerLabel, WorkerLabel). Workers only. The
	// taints a node registers with are in its KubeletConfiguration
	// (KubeletConfigInput.NodeTaints).
	NodeLabels []string `json:"nodeLabels,omitempty"`
}

// BridgeCNIInput describes one node's bridge network.
type BridgeCNIInput struct {
	// PodCIDR is the cluster's pod network (default 10.244.0.0/16).
	PodCIDR string `json:"podCIDR,omitempty"`
	// Nodes are the names of the inventory's nodes, in its order; a node's
	// subnet is the share of PodCIDR at its place in the list.
	Nodes []string `json:"nodes"`
	// Node is the node the config is for; one of Nodes.
	Node string `json:"node"`
	// NodeMaskSize is the prefix length of each node's subnet (default 24
	// for IPv4, 64 for IPv6).
	NodeMaskSize int `json:"nodeMaskSize,omitempty"`
}

// ControlPlaneInput describes the control plane of one controller: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, run by its
// kubelet as static pods.
type ControlPlaneInput struct {
	// Node is this controller's node name, also its etcd member name.
	Node string `json:"node"`
	// NodeIP is the address etcd and the API server listen on and
	// advertise.
	NodeIP string `json:"nodeIP"`
	// EtcdMembers are every controller's etcd member, this one included,
	// in a stable order (default: this one alone).
	EtcdMembers []EtcdMember `json:"etcdMembers,omitempty"`
	// EtcdInitialCluster, when set, gives the members as etcd's member
	// add returns them ("name=https://IP:2380,...", this node included)
	// instead of EtcdMembers: a member joining a running etcd.
	EtcdInitialCluster string `json:"etcdInitialCluster,omitempty"`
	// EtcdInitialClusterState is "new" (default) when the members start
	// together, "existing" when this member joins a running cluster.
	EtcdInitialClusterState string `json:"etcdInitialClusterState,omitempty"`
	// ServiceCIDR is the range Service cluster IPs are allocated from.
	ServiceCIDR string `json:"serviceCIDR"`
	// PodCIDR, when set, is the range node pod CIDRs are allocated from by
	// kube-controller-manager. Leave it unset when the network plugin
	// allocates pod addresses itself.
	PodCIDR string `json:"podCIDR,omitempty"`
	// ServiceAccountIssuer is the issuer of service account tokens
	// (default https://kubernetes.default.svc).
	ServiceAccountIssuer string `json:"serviceAccountIssuer,omitempty"`
	// APIServerPort is the API server's port (default 6443).
	APIServerPort int `json:"apiServerPort,omitempty"`
	// Listen is what the listeners bind: "kubeadm" (default: the API
	// server on every address, etcd's clients on 127.0.0.1 and NodeIP,
	// etcd's metrics, the controller manager and the scheduler on
	// 127.0.0.1) or "node" (every one on NodeIP alone).
	Listen string `json:"listen,omitempty"`
	// Images are the components' images, pinned by tag or digest.
	Images ControlPlaneImages `json:"images"`
	// Certificates, when set, is put on every pod as the annotation
	// RestartAnnotation. The components read their certificates at start;
	// changing it with each renewal (e.g. to the new API server
	// certificate's serial) changes the manifests, so the kubelet
	// restarts the pods onto the new certificates.
	Certificates string `json:"certificates,omitempty"`
}

// EtcdMember is one member of the etcd cluster.
type EtcdMember struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
}

// ControlPlaneImages are the control-plane components' images.
type ControlPlaneImages struct {
	Etcd              string `json:"etcd"`
	APIServer         string `json:"apiServer"`
	ControllerManager string `json:"controllerManager"`
	Scheduler         string `json:"scheduler"`
}

// CertificatesAnnotation is the annotation render.static-pods puts on
// Kedge's control-plane pods: its certificates input, the API server
// certificate's serial of each renewal. A new value is a changed
// manifest, so the kubelet restarts the pods onto the new certificates;
// the kubelet copies it to the mirror pods, where kube.wait-static-pod
// tells the pods of a renewal from the ones before it.
const CertificatesAnnotation = "kedge.dev/certificates"

// SetImageInput is a static pod manifest whose container is to run
// another image (an upgrade): the file is kept byte for byte but for that
// one value.
type SetImageInput struct {
	Manifest  string `json:"manifest" kedge:"required" doc:"the static pod manifest (YAML), e.g. host.read-file's content"`
	Container string `json:"container,omitempty" doc:"the container whose image changes (default: the pod's only container)"`
	Image     string `json:"image,omitempty" doc:"the image to run, with a tag or a digest, e.g. registry.k8s.io/kube-apiserver:v1.36.3"`
	// Tag keeps the image's repository and sets its tag (a digest is
	// dropped: it names the old content).
	Tag string `json:"tag,omitempty" doc:"instead of image: keep the repository the manifest names and set this tag, e.g. v1.36.3"`
}

// SetImageResult is the manifest with the new image, and the image it
// had.
type SetImageResult struct {
	Content  string `json:"content"`
	Image    string `json:"image"`
	Previous string `json:"previous"`
	Changed  bool   `json:"changed"`
}
