package kube

import "kedge.dev/kedge/actions/target"

// UpgradePlanAction is the action name of UpgradePlan.
const UpgradePlanAction = "kube.upgrade-plan"

// UpgradePlanInput is an upgrade to Version and what the controllers'
// hosts hold, read by the steps before: the plan reads the rest (Nodes,
// mirror pods, kube-proxy, /version) from the API.
type UpgradePlanInput struct {
	Cluster target.Kube `json:"cluster"`
	Version string      `json:"version" kedge:"required" doc:"the release to upgrade to, e.g. v1.36.3"`
	// Manifests is each controller's static pod manifests as its host
	// has them: host → component (kube-apiserver, …) → file.
	Manifests map[string]map[string]ManifestFile `json:"manifests,omitempty" doc:"host → component → {path, content}: the controllers' static pod manifests, as host.layout and host.read-file found them"`
	// KubeletImages is each node's KUBELET_IMAGE (host.layout's
	// kubelet.image), by host; empty for a kubelet that is no container.
	KubeletImages map[string]string `json:"kubeletImages,omitempty" doc:"host → the KUBELET_IMAGE its kubelet runs (host.layout's kubelet.image)"`
}

// ManifestFile is a file on a host.
type ManifestFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// UpgradePlanResult is what the upgrade will change, and what it found.
type UpgradePlanResult struct {
	From string `json:"from"` // the oldest API server's release
	To   string `json:"to"`
	// Running is every component found, with where its version was read.
	Running []Running `json:"running"`
	// Controllers lists, per controller host in the order given, each
	// manifest's change.
	Controllers []ControllerChange `json:"controllers"`
	// KubeletImage is the kubelet image of the new release (the
	// controllers' image repository, tagged Version); "" when the
	// kubelets run no image Kedge can retag.
	KubeletImage string `json:"kubeletImage"`
	// Kubelets is each Node's kubelet: its version and whether it is
	// behind To.
	Kubelets []KubeletChange `json:"kubelets"`
	// Images is what each host must pull before its turn.
	Images map[string][]string `json:"images"`
	// Diff is the plan as a unified diff per file, host by host.
	Diff string `json:"diff"`
	// Problems refuse the upgrade (UpgradeRefused); empty when it may
	// start.
	Problems []string `json:"problems"`
}

// ControllerChange is one controller's manifests before and after.
type ControllerChange struct {
	Host      string            `json:"host"`
	Manifests []ManifestChange  `json:"manifests"`
	Images    map[string]string `json:"images"` // component → its new image
}

// ManifestChange is one static pod manifest's image change.
type ManifestChange struct {
	Component string `json:"component"`
	Path      string `json:"path"`
	From      string `json:"from"`
	To        string `json:"to"`
	// Content is the manifest with the new image (render.set-image's).
	Content string `json:"content"`
}

// KubeletChange is one Node's kubelet.
type KubeletChange struct {
	Node    string `json:"node"`
	Version string `json:"version"`
	Behind  bool   `json:"behind"`
}
