package host

import "kedge.dev/kedge/actions/target"

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
