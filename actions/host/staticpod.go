package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// RestartStaticPodAction is the action name of RestartStaticPod.
const RestartStaticPodAction = "host.restart-static-pod"

// RestartStaticPodInput names a static pod manifest.
type RestartStaticPodInput struct {
	Target   target.SSH `json:"target"`
	Manifest string     `json:"manifest" kedge:"required" doc:"the static pod's manifest, e.g. /etc/kubernetes/manifests/kube-apiserver.yaml (host.layout's staticPods)"`
	// At is the time recorded in the annotation (default: now, the
	// worker's clock).
	At string `json:"at,omitempty" doc:"RFC 3339 time to record (default: now)"`
	// StopKubelet stops kubelet.service while the manifest changes and
	// starts it again after. A running kubelet first stops the old pod,
	// then deletes its mirror pod before starting the new one: for etcd
	// of a one-member cluster that deletion goes to an API server whose
	// only etcd is the pod just stopped, and hangs for the API server's
	// request timeout (close to a minute on an idle machine). A kubelet
	// that starts on the changed manifest replaces the mirror pod while
	// the old pod still serves.
	StopKubelet bool `json:"stopKubelet,omitempty" doc:"stop kubelet.service while the manifest changes and start it after (etcd of a one-member cluster: the kubelet would wait close to a minute on its old mirror pod's deletion, through an API server with no etcd)"`
}

// RestartStaticPodResult is the restart asked for: kube.wait-static-pod
// waits for the pod that carries RestartedAt.
type RestartStaticPodResult struct {
	RestartedAt string `json:"restartedAt"`
	Changed     bool   `json:"changed"`
	Backup      string `json:"backup"`
}

func init() {
	spec.Register(spec.Row{Name: RestartStaticPodAction, Doc: "make the kubelet restart a static pod: set the kedge.dev/restarted-at annotation in its manifest (nothing else changes; undo with host.restore-file)",
		In: RestartStaticPodInput{}, Out: RestartStaticPodResult{}, Timeout: 5 * time.Minute,
		Summary: `restart static pod {{.In "manifest"}}{{.On}}`})
}
