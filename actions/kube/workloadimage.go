package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// SetWorkloadImageAction is the action name of SetWorkloadImage.
const SetWorkloadImageAction = "kube.set-workload-image"

// SetWorkloadImageInput names a DaemonSet's or Deployment's container and
// the image it is to run.
type SetWorkloadImageInput struct {
	Cluster   target.Kube `json:"cluster"`
	Kind      string      `json:"kind" kedge:"required,enum=DaemonSet|Deployment" doc:"DaemonSet or Deployment"`
	Namespace string      `json:"namespace,omitempty" doc:"its namespace (default kube-system)"`
	Name      string      `json:"name" kedge:"required" doc:"its name, e.g. kube-proxy"`
	Container string      `json:"container" kedge:"required" doc:"the container whose image changes"`
	// Tag keeps the container's repository and changes the tag (an
	// upgrade's release); Image replaces the whole reference.
	Tag     string `json:"tag,omitempty" doc:"the new tag, the repository kept (one of tag and image)"`
	Image   string `json:"image,omitempty" doc:"the new image reference (one of tag and image)"`
	Timeout string `json:"timeout,omitempty" kedge:"duration" doc:"how long the rollout may take (default 5m)"`
}

// SetWorkloadImageResult says what ran before and what runs now. Present
// is false when the cluster has no such workload: nothing was changed.
type SetWorkloadImageResult struct {
	Present  bool   `json:"present"`
	Previous string `json:"previous"`
	Image    string `json:"image"`
	Changed  bool   `json:"changed"`
}

func init() {
	spec.Register(spec.Row{Name: SetWorkloadImageAction, Doc: "set the image of a DaemonSet's or Deployment's container (a new tag, the repository kept, or a new reference), applied server-side as field manager kedge-upgrade, and wait until every pod is updated and available; a cluster without it is no error (present: false)",
		In: SetWorkloadImageInput{}, Out: SetWorkloadImageResult{}, Timeout: 30 * time.Minute,
		Summary: `roll {{.In "name"}} to a new {{.In "container"}} image`})
}
