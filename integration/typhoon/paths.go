package typhoon

// Flavors.
const (
	Flatcar = "flatcar"
	FCOS    = "fcos"
)

// Typhoon's defaults (bare-metal variables.tf and terraform-render-bootstrap).
const (
	ClusterDNS  = "10.3.0.10"
	ServiceCIDR = "10.3.0.0/16"
	PodCIDR     = "10.20.0.0/14"
	// ServiceAccountIssuer is Typhoon's default service_account_issuer.
	ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
)

// Where Typhoon keeps things on a host, as its templates and its layout
// script put them.
const (
	UnitDir             = "/etc/systemd/system"
	KubeletUnit         = UnitDir + "/kubelet.service"
	KubeletPathUnit     = UnitDir + "/kubelet.path"
	WaitForDNSUnit      = UnitDir + "/wait-for-dns.service"
	EtcdUnit            = UnitDir + "/etcd-member.service"
	EtcdEnv             = "/etc/etcd/etcd.env"
	KubeletConfig       = "/etc/kubernetes/kubelet.yaml"
	BootstrapKubeconfig = "/etc/kubernetes/kubeconfig"
	KubeletKubeconfig   = "/var/lib/kubelet/kubeconfig"
	ManifestsDir        = "/etc/kubernetes/manifests"
	PKIDir              = "/etc/kubernetes/pki"
	EtcdPKIDir          = "/etc/ssl/etcd/etcd"
	// KubeletClientCert is the kubelet's client pair after TLS bootstrap:
	// a link to the dated file the kubelet wrote.
	KubeletClientCert = "/var/lib/kubelet/pki/kubelet-client-current.pem"
)

// Files the layout script leaves on a controller (from assets_dist).
const (
	CACert             = PKIDir + "/ca.crt"
	CAKey              = PKIDir + "/ca.key"
	APIServerCert      = PKIDir + "/apiserver.crt"
	APIServerKey       = PKIDir + "/apiserver.key"
	ServiceAccountPub  = PKIDir + "/service-account.pub"
	ServiceAccountKey  = PKIDir + "/service-account.key"
	AggregationCA      = PKIDir + "/aggregation-ca.crt"
	AggregationCert    = PKIDir + "/aggregation-client.crt"
	AggregationKey     = PKIDir + "/aggregation-client.key"
	EtcdClientCA       = PKIDir + "/etcd-client-ca.crt"
	EtcdClientCert     = PKIDir + "/etcd-client.crt"
	EtcdClientKey      = PKIDir + "/etcd-client.key"
	AdminK             = PKIDir + "/admin.conf"
	ControllerManagerK = PKIDir + "/controller-manager.conf"
	SchedulerK         = PKIDir + "/scheduler.conf"
	EtcdServerCA       = EtcdPKIDir + "/server-ca.crt"
	EtcdServerCert     = EtcdPKIDir + "/server.crt"
	EtcdServerKey      = EtcdPKIDir + "/server.key"
	EtcdPeerCA         = EtcdPKIDir + "/peer-ca.crt"
	EtcdPeerCert       = EtcdPKIDir + "/peer.crt"
	EtcdPeerKey        = EtcdPKIDir + "/peer.key"
)

// EtcdUID is Flatcar's etcd user (the etcd unit's --user 232:232); the
// layout script gives it /etc/ssl/etcd.
const EtcdUID = 232

// ControlPlaneUID is the user Typhoon's control plane static pods run as
// (runAsUser: 65534, runAsNonRoot).
const ControlPlaneUID = 65534
