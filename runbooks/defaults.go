package runbooks

// The control plane the built-in runbooks render when the inventory does
// not say.
const (
	DefaultKubernetesVersion = "v1.35.4"
	DefaultImageRepository   = "registry.k8s.io"
	DefaultEtcdImage         = "registry.k8s.io/etcd:3.6.16-0"
)
