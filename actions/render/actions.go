package render

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
