package host

import (
	"context"
	"fmt"
	"slices"

	"kedge.dev/kedge/activities/layout"
	"kedge.dev/kedge/activities/sshpool"
)

// KubeletFilesAction reads a worker's kubelet files, made for another
// node (host.kubelet-files).
const KubeletFilesAction = "host.kubelet-files"

// KubeletFilesInput names the worker to copy (the target) and the node
// the files are for.
type KubeletFilesInput struct {
	Target sshpool.Target `json:"target"`
	// For is the node that will run the copy.
	For layout.Identity `json:"for" kedge:"required" doc:"the new node: {nodeName, hostname, address}"`
	// Image, when set, is the kubelet image the new node runs instead of
	// the reference's (set in the image drop-in a swap writes).
	Image string `json:"image,omitempty" doc:"the kubelet image for the new node (default: the reference's)"`
	// Require is the layouts the reference may have.
	Require []string `json:"require,omitempty" doc:"the layouts the reference may have (default typhoon-flatcar, typhoon-fcos)"`
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
	// Files are host.install-bundle's files.
	Files []BundleFile `json:"files"`
}

// KubeletFiles reads how a worker runs its kubelet (its unit, drop-ins,
// kubelet.path and KubeletConfiguration; never a credential) and returns
// those files as they must be on another node (layout.Retarget): what a
// node-join into a cluster Kedge did not build writes.
func (a *Activities) KubeletFiles(ctx context.Context, in KubeletFilesInput) (KubeletFilesResult, error) {
	res, err := a.kubeletFiles(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) kubeletFiles(ctx context.Context, in KubeletFilesInput) (KubeletFilesResult, error) {
	t := in.Target
	if in.For.NodeName == "" {
		return KubeletFilesResult{}, invalid("for.nodeName is required")
	}
	if in.Image != "" {
		if err := checkImage(in.Image); err != nil {
			return KubeletFilesResult{}, err
		}
	}
	require := in.Require
	if len(require) == 0 {
		require = []string{layout.KindTyphoonFlatcar, layout.KindTyphoonFCOS}
	}
	l, err := a.layout(ctx, LayoutInput{Target: t, Require: require})
	if err != nil {
		return KubeletFilesResult{}, err
	}
	if l.Role != "worker" {
		return KubeletFilesResult{}, invalid(fmt.Sprintf("%s is a %s: a new worker is made like a worker (like=WORKER)", nodeName(t), l.Role))
	}
	k := l.Kubelet
	if in.Image != "" && k.ImageOverriddenBy != "" {
		return KubeletFilesResult{}, invalid(fmt.Sprintf("%s: %s sets KUBELET_IMAGE after %s, so image=%s would not take effect on the new node", nodeName(t), k.ImageOverriddenBy, layout.ImageDropIn, in.Image))
	}
	paths, err := layout.KubeletFiles(l)
	if err != nil {
		return KubeletFilesResult{}, invalid(fmt.Sprintf("%s: %v", nodeName(t), err))
	}
	var files []layout.CopyFile
	for _, p := range paths {
		f, err := a.readFile(ctx, ReadFileInput{Target: t, Path: p, MaxBytes: 1 << 20})
		if err != nil {
			return KubeletFilesResult{}, err
		}
		if f.ContentBase64 != "" {
			return KubeletFilesResult{}, invalid(fmt.Sprintf("%s on %s is not text", p, nodeName(t)))
		}
		files = append(files, layout.CopyFile{Path: p, Content: f.Content, Mode: f.Mode})
	}
	image := k.Image
	if in.Image != "" {
		image = in.Image
		content, err := RenderDropIn(map[string]string{layout.ImageVariable: in.Image})
		if err != nil {
			return KubeletFilesResult{}, invalid(err.Error())
		}
		i := slices.IndexFunc(files, func(f layout.CopyFile) bool { return f.Path == layout.ImageDropIn })
		if i < 0 {
			files = append(files, layout.CopyFile{Path: layout.ImageDropIn, Mode: "0644"})
			i = len(files) - 1
		}
		files[i].Content = content
	}
	from := layout.Identity{NodeName: l.NodeName, Hostname: l.Hostname, Address: t.Address}
	out, err := layout.Retarget(files, from, in.For)
	if err != nil {
		return KubeletFilesResult{}, invalid(fmt.Sprintf("%s: %v", nodeName(t), err))
	}
	res := KubeletFilesResult{Kind: l.Kind, Runtime: k.Runtime, Image: image, Reference: l.NodeName,
		BootstrapKubeconfig: k.BootstrapKubeconfig, ClientCAFile: k.ClientCAFile, PathExists: k.PathExists,
		ServiceEnabled: k.Enabled == "enabled", PathEnabled: k.PathEnabled == "enabled"}
	for _, f := range out {
		res.Files = append(res.Files, BundleFile{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	if res.BootstrapKubeconfig == "" {
		return KubeletFilesResult{}, invalid(fmt.Sprintf("%s: the kubelet has no --bootstrap-kubeconfig: a new node could not join through TLS bootstrap", nodeName(t)))
	}
	return res, nil
}
