package kubeapi

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/render"
)

// WaitStaticPod waits until the kubelet runs a static pod and every
// container of it is ready (kube.wait-static-pod), as its mirror pod
// reports; with restartedAt, only the pod of that restart counts: until
// the kubelet has read the changed manifest, the old pod may still answer.
func (a *Activities) WaitStaticPod(ctx context.Context, in kube.WaitStaticPodInput) (kube.WaitStaticPodResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.WaitStaticPodResult{}, err
	}
	timeout, err := parseDuration(in.Timeout, 5*time.Minute)
	if err != nil {
		return kube.WaitStaticPodResult{}, err
	}
	ns := in.Namespace
	if ns == "" {
		ns = metav1.NamespaceSystem
	}
	maxRestarts := in.MaxRestarts
	if maxRestarts == 0 {
		maxRestarts = DefaultMaxRestarts
	}
	name := in.Pod + "-" + in.Node
	var after *time.Time
	if in.RestartedAfter != "" {
		t, err := time.Parse(time.RFC3339, in.RestartedAfter)
		if err != nil {
			return kube.WaitStaticPodResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("restartedAfter %q is not an RFC 3339 time", in.RestartedAfter), errtype.InvalidInput, nil)
		}
		after = &t
	}
	deadline := time.Now().Add(timeout)
	last := "not seen yet"
	seen := restartsSeen{}
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case in.Gone && apierrors.IsNotFound(err):
			return kube.WaitStaticPodResult{}, nil
		case in.Gone && err == nil:
			last = "the kubelet still runs it"
		case err == nil:
			ready, restarts, why := podReady(p)
			switch {
			case in.RestartedAt != "" && p.Annotations[layout.RestartedAtAnnotation] != in.RestartedAt,
				after != nil && !restartedAfter(p.Annotations[layout.RestartedAtAnnotation], *after):
				last = fmt.Sprintf("the kubelet runs the pod from before the restart (%s %q)", layout.RestartedAtAnnotation, p.Annotations[layout.RestartedAtAnnotation])
			case in.Certificates != "" && p.Annotations[render.CertificatesAnnotation] != in.Certificates:
				last = fmt.Sprintf("the kubelet runs the pod from before the renewal (%s %q)", render.CertificatesAnnotation, p.Annotations[render.CertificatesAnnotation])
			case in.Image != "" && podImage(p, in.Pod) != in.Image:
				last = fmt.Sprintf("the kubelet runs the pod of image %s", podImage(p, in.Pod))
			case !ready:
				last = why
				if msg, looping := crashLooping(p, maxRestarts, seen.since(p)); looping {
					return kube.WaitStaticPodResult{Restarts: restarts}, temporal.NewNonRetryableApplicationError(
						fmt.Sprintf("static pod %s/%s is crash-looping: %s; waiting longer brings nothing", ns, name, msg), errtype.CrashLooping, nil)
				}
			default:
				return kube.WaitStaticPodResult{Ready: true, Restarts: restarts}, nil
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
			return kube.WaitStaticPodResult{}, temporal.NewApplicationError(fmt.Sprintf("static pod %s/%s not %s after %s: %s", ns, name, want, timeout, last), errtype.NodeNotReady)
		}
		select {
		case <-ctx.Done():
			return kube.WaitStaticPodResult{}, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

// podImage is the image of the pod's container named as the static pod,
// else of its first container.
func podImage(p *corev1.Pod, name string) string {
	cs := p.Spec.Containers
	for _, c := range cs {
		if c.Name == name {
			return c.Image
		}
	}
	if len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

// DefaultMaxRestarts is how many times a container may exit before
// kube.wait-static-pod calls it crash-looping.
const DefaultMaxRestarts = 3

// restartsSeen holds each container's restart count when the wait first
// saw the pod (by UID: a pod made anew starts afresh).
type restartsSeen struct {
	uid   types.UID
	count map[string]int32
}

// since returns the counts the pod's restarts are measured from.
func (r *restartsSeen) since(p *corev1.Pod) map[string]int32 {
	if r.count == nil || r.uid != p.UID {
		r.uid, r.count = p.UID, map[string]int32{}
		for _, c := range p.Status.ContainerStatuses {
			r.count[c.Name] = c.RestartCount
		}
	}
	return r.count
}

// crashLooping says whether a container of the pod has restarted max
// times (max > 0) since the counts in base and is not running, and how it
// last ended.
func crashLooping(p *corev1.Pod, max int, base map[string]int32) (string, bool) {
	if max <= 0 {
		return "", false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Ready || c.State.Running != nil || int(c.RestartCount-base[c.Name]) < max {
			continue
		}
		msg := fmt.Sprintf("container %s restarted %d times", c.Name, c.RestartCount)
		if b := base[c.Name]; b > 0 {
			msg += fmt.Sprintf(" (%d since the wait began)", c.RestartCount-b)
		}
		last := c.LastTerminationState.Terminated
		if c.State.Terminated != nil {
			last = c.State.Terminated
		}
		if last != nil {
			msg += fmt.Sprintf(", last exited %d (%s)", last.ExitCode, last.Reason)
			if m := strings.TrimSpace(last.Message); m != "" {
				if len(m) > 600 {
					m = "…" + m[len(m)-600:]
				}
				msg += ": " + m
			}
		}
		if w := c.State.Waiting; w != nil && w.Reason != "" {
			msg += " [" + w.Reason + "]"
		}
		return msg, true
	}
	return "", false
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

// restartedAfter: the restart annotation v is a time later than t.
func restartedAfter(v string, t time.Time) bool {
	at, err := time.Parse(time.RFC3339, v)
	return err == nil && at.After(t)
}
