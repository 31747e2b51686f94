package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// WaitStaticPodAction is the action name of WaitStaticPod.
const WaitStaticPodAction = "kube.wait-static-pod"

// WaitStaticPodInput names a node's static pod and the restart to wait
// for.
type WaitStaticPodInput struct {
	Cluster     target.Kube `json:"cluster"`
	Node        string      `json:"node"`
	Pod         string      `json:"pod" kedge:"required" doc:"the static pod's name, e.g. kube-apiserver (its mirror pod is NAME-NODE)"`
	Namespace   string      `json:"namespace,omitempty" doc:"its namespace (default kube-system)"`
	RestartedAt string      `json:"restartedAt,omitempty" doc:"wait for the pod of this host.restart-static-pod (its restartedAt output)"`
	// RestartedAfter waits for the pod of a restart later than this one:
	// an undo's restart, whose own time no step output holds.
	RestartedAfter string `json:"restartedAfter,omitempty" doc:"wait for the pod of a host.restart-static-pod later than this RFC 3339 time (e.g. the restart an undo follows)"`
	// Certificates waits for the pod rendered for these certificates
	// (Kedge's layout): until the kubelet has read the renewed manifest,
	// the pod from before the renewal still runs, and the API server even
	// serves its new certificate (it reloads it from disk).
	Certificates string `json:"certificates,omitempty" doc:"wait for the pod rendered for these certificates: render.static-pods' certificates input (its kedge.dev/certificates annotation)"`
	// Image waits for the pod whose containers run this image: an
	// upgrade's manifest, until the kubelet has read it, leaves the old
	// version running and answering.
	Image   string `json:"image,omitempty" doc:"wait for the pod running this image (an upgraded manifest's): the mirror pod's container of the pod's name, or its only container"`
	Timeout string `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 5m)"`
	// MaxRestarts bounds the wait for a pod that crash-loops: once a
	// container has exited this many times while the wait watched it and
	// is not running, waiting longer brings nothing. Exits before the wait
	// first saw the pod do not count: the wait sees it through the API
	// server, and a controller manager or scheduler exits by itself while
	// the API server it talks to restarts.
	MaxRestarts int `json:"maxRestarts,omitempty" doc:"fail at once, not retried (CrashLooping), when a container of the pod has restarted this many times since the wait first saw the pod and is not running (default 3; -1: wait out the timeout)"`
	// Gone waits instead until the kubelet no longer runs the pod (its
	// manifest was taken away).
	Gone bool `json:"gone,omitempty" doc:"wait until the kubelet no longer runs the pod (its mirror pod is gone)"`
}

// WaitStaticPodResult is the mirror pod once it is ready.
type WaitStaticPodResult struct {
	Ready    bool  `json:"ready"`
	Restarts int32 `json:"restarts"`
}

func init() {
	spec.Register(spec.Row{Name: WaitStaticPodAction, Doc: "wait until the node's kubelet runs a static pod with every container ready (its mirror pod); with restartedAt, the pod of that host.restart-static-pod",
		In: WaitStaticPodInput{}, Out: WaitStaticPodResult{}, Timeout: 10 * time.Minute,
		Summary: `{{if .Flag "gone"}}wait until static pod {{.In "pod"}} is gone from {{.Host}}{{else}}wait for static pod {{.In "pod"}} on {{.Host}}{{end}}`})
}
