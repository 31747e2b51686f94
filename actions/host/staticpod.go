package host

import "kedge.dev/kedge/actions/target"

// RestartStaticPodAction is the action name of RestartStaticPod.
const RestartStaticPodAction = "host.restart-static-pod"

// RestartStaticPodInput names a static pod manifest.
type RestartStaticPodInput struct {
	Target   target.SSH `json:"target"`
	Manifest string     `json:"manifest" kedge:"required" doc:"the static pod's manifest, e.g. /etc/kubernetes/manifests/kube-apiserver.yaml (host.layout's staticPods)"`
	// At is the time recorded in the annotation (default: now, the
	// worker's clock).
	At string `json:"at,omitempty" doc:"RFC 3339 time to record (default: now)"`
}

// RestartStaticPodResult is the restart asked for: kube.wait-static-pod
// waits for the pod that carries RestartedAt.
type RestartStaticPodResult struct {
	RestartedAt string `json:"restartedAt"`
	Changed     bool   `json:"changed"`
	Backup      string `json:"backup"`
}
