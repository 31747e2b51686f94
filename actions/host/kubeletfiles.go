package host

import (
	"time"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// KubeletFilesAction reads a worker's kubelet files, made for another
// node (host.kubelet-files).
const KubeletFilesAction = "host.kubelet-files"

// KubeletFilesInput names the worker to copy (the target) and the node
// the files are for.
type KubeletFilesInput struct {
	Target target.SSH `json:"target"`
	// For is the node that will run the copy.
	For layout.Identity `json:"for" kedge:"required" doc:"the new node: {nodeName, hostname, address}"`
	// Image, when set, is the kubelet image the new node runs instead of
	// the reference's (set in the image drop-in a swap writes).
	Image string `json:"image,omitempty" doc:"the kubelet image for the new node (default: the reference's)"`
	// Require is the layouts the reference may have.
	Require []string `json:"require,omitempty" doc:"the layouts the reference may have (default typhoon-flatcar, typhoon-fcos)"`
	// Labels and Taints are the new node's (the inventory's): its
	// kubelet registers with them instead of the reference's.
	Labels []string `json:"labels,omitempty" doc:"the new node's labels (key=value): the kubelet registers with those it may set (--node-labels), never the reference's"`
	Taints []string `json:"taints,omitempty" doc:"the new node's taints (key[=value]:Effect): the kubelet registers with them (--register-with-taints), never the reference's"`
}

// KubeletFilesResult is the reference's kubelet made for the new node.
type KubeletFilesResult struct {
	Kind    string `json:"kind"`
	Runtime string `json:"runtime"`
	Image   string `json:"image"`
	// Reference is the reference's Node name.
	Reference           string `json:"reference"`
	BootstrapKubeconfig string `json:"bootstrapKubeconfig"`
	ClientCAFile        string `json:"clientCAFile"`
	// PathExists is the file whose appearance starts the kubelet through
	// kubelet.path ("" without one): the bootstrap kubeconfig, on Typhoon.
	PathExists     string `json:"pathExists"`
	ServiceEnabled bool   `json:"serviceEnabled"`
	PathEnabled    bool   `json:"pathEnabled"`
	// Files are host.install-bundle's files: the kubelet's, then the
	// host's (layout.ReadHostSetup).
	Files []BundleFile `json:"files"`
	// Modules, SysctlFiles, Enable and Start are what host.prepare-node
	// does on the new node once the files are there.
	Modules     []string `json:"modules"`
	SysctlFiles []string `json:"sysctlFiles"`
	Enable      []string `json:"enable"`
	Start       []string `json:"start"`
}

func init() {
	spec.Register(spec.Row{Name: KubeletFilesAction, Doc: "read how a worker runs its kubelet (unit, drop-ins, kubelet.path, KubeletConfiguration; never a credential) and what its host has for it (Typhoon's containerd configuration, kernel modules, sysctls, the units the kubelet requires), and give the files back made for another node: its --hostname-override and --node-ip, its own labels and taints instead of the worker's, anything else naming the worker refused with file and line",
		In: KubeletFilesInput{}, Out: KubeletFilesResult{}, Timeout: 2 * time.Minute,
		Summary: `read the kubelet files of{{.On}} for a new node`})
}
