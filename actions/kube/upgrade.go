package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// UpgradePlanAction is the action name of UpgradePlan.
const UpgradePlanAction = "kube.upgrade-plan"

// UpgradePlanInput is an upgrade to Version and what the hosts hold, as
// the steps before read it: the plan reads the rest (Nodes, kube-proxy,
// /version) from the API.
type UpgradePlanInput struct {
	Cluster target.Kube `json:"cluster"`
	Version string      `json:"version" kedge:"required" doc:"the release to upgrade to, e.g. v1.36.3"`
	// Layouts is host.layout's outputs by host: where each controller
	// keeps its static pods, the image each kubelet runs.
	Layouts map[string]HostLayout `json:"layouts" kedge:"required" doc:"host.layout's outputs by host (the controllers' staticPods, every kubelet's image)"`
	// Manifests is what host.read-file read of each controller's static
	// pod manifests: component (kube-apiserver, …) → host → file.
	Manifests map[string]map[string]FileContent `json:"manifests" kedge:"required" doc:"component → host.read-file's outputs by host: the controllers' static pod manifests"`
	// InventoryVersion is the inventory's kubernetes.version: what Kedge
	// renders a controller of its own layout with (bootstrap,
	// cert-renewal, a controller join).
	InventoryVersion string `json:"inventoryVersion,omitempty" doc:"the inventory's kubernetes.version: on Kedge's layout it must be the release upgraded to"`
	// Etcd is etcd.health's members: the release each runs.
	Etcd []EtcdMember `json:"etcd,omitempty" doc:"etcd.health's members (name, version): etcd's release, checked against what the Kubernetes release needs"`
	// DropIns is what host.read-file read of each host's KUBELET_IMAGE
	// drop-in (host.layout's kubelet.imageDropIn; a missing one empty):
	// the plan shows the change the kubelet swap makes to it.
	DropIns map[string]FileContent `json:"dropIns,omitempty" doc:"host.read-file's outputs by host: each kubelet's KUBELET_IMAGE drop-in (missing: empty), for the plan's diff"`
}

// EtcdMember is what the plan reads of etcd.health's members.
type EtcdMember struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// HostLayout is what the plan reads of host.layout's outputs.
type HostLayout struct {
	Kind       string            `json:"kind"`
	StaticPods map[string]string `json:"staticPods"`
	Kubelet    *KubeletLayout    `json:"kubelet"`
}

// KubeletLayout is what the plan reads of host.layout's kubelet.
type KubeletLayout struct {
	Image string `json:"image"`
	// ImageDropIn is the drop-in the kubelet swap writes;
	// ImageDropInRefused says why it would not know where to.
	ImageDropIn        string `json:"imageDropIn"`
	ImageDropInRefused string `json:"imageDropInRefused"`
}

// FileContent is what the plan reads of host.read-file's outputs.
type FileContent struct {
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
	// CRIImages is what each host's containerd (the kubelet's pods'
	// runtime) must hold: the controllers' new static pod images, every
	// host's new kube-proxy image. The kubelet image is pulled by the
	// kubelet swap, with the host's own runtime.
	CRIImages map[string][]string `json:"criImages"`
	// CoreDNS is what happens to CoreDNS, nil when the cluster runs none
	// (no Deployment kube-system/coredns). CoreDNSTag and Corefile repeat
	// its Tag and Corefile for the runbook's steps.
	CoreDNS    *CoreDNSChange `json:"coreDNS"`
	CoreDNSTag string         `json:"coreDNSTag"`
	Corefile   string         `json:"corefile"`
	// Diff is the plan as a unified diff per file, host by host.
	Diff string `json:"diff"`
	// Manifests says, on Typhoon's layout, what the controllers'
	// manifests become.
	Manifests string `json:"manifests,omitempty"`
	// Summary is the plan in a few lines, for a person to approve (the
	// approval before anything changes, a chat message): the releases,
	// each controller's images and the kubelets.
	Summary string `json:"summary"`
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

func init() {
	spec.Register(spec.Row{Name: UpgradePlanAction, Doc: "plan an upgrade to a Kubernetes release: what runs now (the controllers' manifests, every Node's kubelet, kube-proxy, /version), the version skew policy checked, each manifest with its new image and a diff, the flags the release removed by file and line; refused (UpgradeRefused, not retried) before anything changes",
		In: UpgradePlanInput{}, Out: UpgradePlanResult{}, Timeout: time.Minute,
		Summary: `plan the upgrade to {{.In "version"}}`})
}
