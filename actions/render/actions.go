package render

import (
	"time"

	"kedge.dev/kedge/actions/spec"
)

// Action names.
const (
	KubeconfigAction    = "render.kubeconfig"
	KubeletConfigAction = "render.kubelet-config"
	KubeletUnitAction   = "render.kubelet-unit"
	BridgeCNIAction     = "render.bridge-cni"
	StaticPodsAction    = "render.static-pods"
	SetImageAction      = "render.set-image"
)

// FileResult is one rendered file.
type FileResult struct {
	Content string `json:"content"`
}

// StaticPodsResult is the control plane's manifests, by file name.
type StaticPodsResult struct {
	Files map[string]string `json:"files"`
}

func init() {
	spec.Register(spec.Row{Name: KubeconfigAction, Doc: "render a kubeconfig (CA and a token or client certificate embedded)",
		In: KubeconfigInput{}, Out: FileResult{}, Timeout: 30 * time.Second,
		Summary: `render kubeconfig{{with .In "node"}} for {{.}}{{end}}`})
}

func init() {
	spec.Register(spec.Row{Name: KubeletConfigAction, Doc: "render the kubelet's KubeletConfiguration file",
		In: KubeletConfigInput{}, Out: FileResult{}, Timeout: 30 * time.Second,
		Summary: `render kubelet-config{{with .In "node"}} for {{.}}{{end}}`})
}

func init() {
	spec.Register(spec.Row{Name: KubeletUnitAction, Doc: "render kubelet.service: the kubelet run as a container of ${KUBELET_IMAGE}",
		In: KubeletUnitInput{}, Out: FileResult{}, Timeout: 30 * time.Second,
		Summary: `render kubelet-unit{{with .In "node"}} for {{.}}{{end}}`})
}

func init() {
	spec.Register(spec.Row{Name: BridgeCNIAction, Doc: "render a node's CNI network: a bridge with addresses from the node's share of the pod network",
		In: BridgeCNIInput{}, Out: FileResult{}, Timeout: 30 * time.Second,
		Summary: `render bridge-cni{{with .In "node"}} for {{.}}{{end}}`})
}

func init() {
	spec.Register(spec.Row{Name: StaticPodsAction, Doc: "render the control plane's static pod manifests (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)",
		In: ControlPlaneInput{}, Out: StaticPodsResult{}, Timeout: 30 * time.Second,
		Summary: `render static-pods{{with .In "node"}} for {{.}}{{end}}`})
}

func init() {
	spec.Register(spec.Row{Name: SetImageAction, Doc: "a static pod manifest with another image for one container (an upgrade), kept byte for byte otherwise",
		In: SetImageInput{}, Out: SetImageResult{}, Timeout: 30 * time.Second,
		Summary: `{{with .In "image"}}set image {{.}}{{else}}set the image's tag{{end}}{{with .In "container"}} of {{.}}{{end}}`})
}
