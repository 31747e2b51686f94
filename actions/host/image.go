package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// PullImageAction pulls an image with the host's container runtime
// before anything else needs it, and reads the kubelet version it holds.
const PullImageAction = "host.pull-image"

// PullImageInput names the image and the runtime the host's kubelet unit
// uses.
type PullImageInput struct {
	Target  target.SSH `json:"target"`
	Image   string     `json:"image" kedge:"required" doc:"the image reference, with a tag or a digest"`
	Runtime string     `json:"runtime" kedge:"required,enum=docker|podman" doc:"the container runtime of the host's kubelet unit: docker or podman"`
	// KubeletVersion runs the image's entrypoint (the kubelet, in
	// quay.io/poseidon/kubelet and in the images Kedge renders units for)
	// with --version, in a container without network that is removed
	// after.
	KubeletVersion bool   `json:"kubeletVersion,omitempty" doc:"also report the kubelet version the image holds (its entrypoint run with --version)"`
	Timeout        string `json:"timeout,omitempty" kedge:"duration" doc:"how long the pull may take (default 10m)"`
}

// PullImageResult reports the image and the kubelet version in it.
type PullImageResult struct {
	Image          string `json:"image"`
	KubeletVersion string `json:"kubeletVersion"`
}

// PullCRIImagesAction puts images in the container runtime the kubelet
// runs pods with (containerd, its k8s.io namespace) before a static pod
// or a DaemonSet needs them.
const PullCRIImagesAction = "host.pull-cri-images"

// PullCRIImagesInput names the images and where containerd is.
type PullCRIImagesInput struct {
	Target target.SSH `json:"target"`
	Images []string   `json:"images" doc:"the image references (with a tag or a digest); an empty list does nothing"`
	// Address is containerd's socket (the kubelet's
	// containerRuntimeEndpoint without unix://).
	Address string `json:"address,omitempty" doc:"containerd's socket (default /run/containerd/containerd.sock)"`
	// Root is containerd's root directory, whose file system holds the
	// images.
	Root string `json:"root,omitempty" doc:"containerd's root directory, whose free space is checked before a pull (default /var/lib/containerd)"`
	// MinFreeMiB is the free space the root's file system must have
	// before anything is pulled.
	MinFreeMiB int    `json:"minFreeMiB,omitempty" doc:"refuse to pull with less free space than this under root (default 1024)"`
	Timeout    string `json:"timeout,omitempty" kedge:"duration" doc:"how long the pulls may take in all (default 10m)"`
}

// PullCRIImagesResult says which images were there and which were
// pulled.
type PullCRIImagesResult struct {
	Present []string `json:"present"`
	Pulled  []string `json:"pulled"`
	// FreeMiB is the free space under root before any pull.
	FreeMiB int64 `json:"freeMiB"`
}

func init() {
	spec.Register(spec.Row{Name: PullImageAction, Doc: "pull an image with the host's container runtime (docker or podman) and, with kubeletVersion, read the kubelet version it holds (its entrypoint run with --version)",
		In: PullImageInput{}, Out: PullImageResult{}, Timeout: 15 * time.Minute,
		Summary: `pull {{.In "image"}}{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: PullCRIImagesAction, Doc: "put images in containerd's k8s.io namespace, where the kubelet finds its pods' images, ahead of need: each one there already left alone, the others pulled with ctr once containerd's root has minFreeMiB free (DiskFull otherwise, not retried)",
		In: PullCRIImagesInput{}, Out: PullCRIImagesResult{}, Timeout: 15 * time.Minute,
		Summary: `pull images into containerd{{.On}}`})
}
