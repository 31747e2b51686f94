package kube

// CoreDNSReleases is the CoreDNS release kubeadm installs with each
// Kubernetes minor: CoreDNSVersion in cmd/kubeadm/app/constants of that
// release's source (v1.35.4, v1.36.3). An upgrade to a minor not listed
// leaves CoreDNS as it runs, and its plan says so.
var CoreDNSReleases = map[string]string{
	"v1.35": "v1.13.1",
	"v1.36": "v1.14.2",
}

// CoreDNSFor is the CoreDNS release for Kubernetes release v.
func CoreDNSFor(v Version) (string, bool) {
	r, ok := CoreDNSReleases[v.MinorString()]
	return r, ok
}

// CoreDNSChange is what an upgrade does to CoreDNS (Deployment and
// ConfigMap kube-system/coredns), where the cluster runs it.
type CoreDNSChange struct {
	From string `json:"from"` // the image it runs
	To   string `json:"to"`   // the image it will run; From when kept
	// Tag is To's tag, "" when CoreDNS is kept.
	Tag string `json:"tag"`
	// Corefile is the Corefile migrated to To's release (CoreDNS's own
	// migration rules), "" when it needs no change: written before the
	// new image rolls out.
	Corefile string `json:"corefile"`
	// Kept says why CoreDNS stays as it runs, "" when it changes.
	Kept string `json:"kept"`
}
