package kube

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/activities/layout"
)

// WaitStaticPodAction is the action name of WaitStaticPod.
const WaitStaticPodAction = "kube.wait-static-pod"

// WaitStaticPodInput names a node's static pod and the restart to wait
// for.
type WaitStaticPodInput struct {
	Cluster     Cluster `json:"cluster"`
	Node        string  `json:"node"`
	Pod         string  `json:"pod" kedge:"required" doc:"the static pod's name, e.g. kube-apiserver (its mirror pod is NAME-NODE)"`
	Namespace   string  `json:"namespace,omitempty" doc:"its namespace (default kube-system)"`
	RestartedAt string  `json:"restartedAt,omitempty" doc:"wait for the pod of this host.restart-static-pod (its restartedAt output)"`
	Timeout     string  `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 5m)"`
	// Gone waits instead until the kubelet no longer runs the pod (its
	// manifest was taken away).
	Gone bool `json:"gone,omitempty" doc:"wait until the kubelet no longer runs the pod (its mirror pod is gone)"`
}

// WaitStaticPodResult is the mirror pod once it is ready.
type WaitStaticPodResult struct {
	Ready    bool  `json:"ready"`
	Restarts int32 `json:"restarts"`
}

// WaitStaticPod waits until the kubelet runs a static pod and every
// container of it is ready (kube.wait-static-pod), as its mirror pod
// reports; with restartedAt, only the pod of that restart counts: until
// the kubelet has read the changed manifest, the old pod may still answer.
func (a *Activities) WaitStaticPod(ctx context.Context, in WaitStaticPodInput) (WaitStaticPodResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return WaitStaticPodResult{}, err
	}
	timeout, err := parseDuration(in.Timeout, 5*time.Minute)
	if err != nil {
		return WaitStaticPodResult{}, err
	}
	ns := in.Namespace
	if ns == "" {
		ns = metav1.NamespaceSystem
	}
	name := in.Pod + "-" + in.Node
	deadline := time.Now().Add(timeout)
	last := "not seen yet"
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case in.Gone && apierrors.IsNotFound(err):
			return WaitStaticPodResult{}, nil
		case in.Gone && err == nil:
			last = "the kubelet still runs it"
		case err == nil:
			ready, restarts, why := podReady(p)
			switch {
			case in.RestartedAt != "" && p.Annotations[layout.RestartedAtAnnotation] != in.RestartedAt:
				last = fmt.Sprintf("the kubelet runs the pod from before the restart (%s %q)", layout.RestartedAtAnnotation, p.Annotations[layout.RestartedAtAnnotation])
			case !ready:
				last = why
			default:
				return WaitStaticPodResult{Ready: true, Restarts: restarts}, nil
			}
		case apierrors.IsNotFound(err):
			last = "no mirror pod " + ns + "/" + name
		default:
			last = err.Error()
		}
		heartbeat(ctx, last)
		if time.Now().After(deadline) {
			want := "ready"
			if in.Gone {
				want = "gone"
			}
			return WaitStaticPodResult{}, temporal.NewApplicationError(fmt.Sprintf("static pod %s/%s not %s after %s: %s", ns, name, want, timeout, last), ErrTypeNotReady)
		}
		select {
		case <-ctx.Done():
			return WaitStaticPodResult{}, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

func podReady(p *corev1.Pod) (bool, int32, string) {
	var restarts int32
	if len(p.Status.ContainerStatuses) == 0 {
		return false, 0, "no container status yet"
	}
	for _, c := range p.Status.ContainerStatuses {
		restarts += c.RestartCount
		if !c.Ready || c.State.Running == nil {
			return false, restarts, fmt.Sprintf("container %s not ready", c.Name)
		}
	}
	return true, restarts, ""
}
