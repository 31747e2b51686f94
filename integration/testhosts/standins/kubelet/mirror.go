package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Annotations the real kubelet puts on a mirror pod besides
// kubernetes.io/config.mirror.
const (
	configHashAnnotation   = "kubernetes.io/config.hash"
	configSourceAnnotation = "kubernetes.io/config.source"
	configSeenAnnotation   = "kubernetes.io/config.seen"
)

// mirrors publishes a mirror pod for each static pod, as the real kubelet
// does: named POD-NODE, bound to the node and owned by its Node (which
// NodeRestriction lets a node do for itself), annotated with the static
// pod's hash, its status that of the processes. A mirror pod whose static
// pod changed is replaced; one whose static pod is gone is deleted.
type mirrors struct {
	cs     kubernetes.Interface
	node   *node
	static *staticPods // nil without a static pod path
	logger *log.Logger
	said   map[string]string // last problem logged per pod, so each is logged once
}

func mirrorName(pod *corev1.Pod, n *node) string { return pod.Name + "-" + n.name }

// sync reconciles the mirror pods among pods, the pods bound to the node.
func (m *mirrors) sync(ctx context.Context, pods []corev1.Pod) {
	if m.node.uid == "" {
		return
	}
	var statuses []staticPodStatus
	if m.static != nil {
		var synced bool
		if statuses, synced = m.static.statuses(); !synced {
			return
		}
	}
	existing := map[string]*corev1.Pod{}
	for i := range pods {
		if _, ok := pods[i].Annotations[mirrorAnnotation]; ok {
			existing[pods[i].Namespace+"/"+pods[i].Name] = &pods[i]
		}
	}
	for _, st := range statuses {
		key := st.pod.Namespace + "/" + mirrorName(st.pod, m.node)
		mp := existing[key]
		delete(existing, key)
		switch {
		case mp != nil && mp.DeletionTimestamp != nil:
			continue // being deleted (runScheduled completes it); made anew next time
		case mp != nil && mp.Annotations[mirrorAnnotation] != st.hash:
			m.delete(ctx, mp, "its static pod changed")
			continue
		case mp == nil:
			created, err := m.cs.CoreV1().Pods(st.pod.Namespace).Create(ctx, mirrorPod(st, m.node), metav1.CreateOptions{})
			if err != nil {
				m.problem(key, fmt.Sprintf("create mirror pod %s: %v", key, err))
				continue
			}
			m.logger.Printf("created mirror pod %s", key)
			mp = created
		}
		want := mirrorStatus(st, m.node, mp.Status)
		if statusSummary(want) == statusSummary(mp.Status) {
			continue
		}
		mp.Status = want
		if _, err := m.cs.CoreV1().Pods(mp.Namespace).UpdateStatus(ctx, mp, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			m.problem(key, fmt.Sprintf("update mirror pod %s status: %v", key, err))
			continue
		}
		delete(m.said, key)
	}
	for _, mp := range existing {
		if mp.DeletionTimestamp == nil {
			m.delete(ctx, mp, "its static pod is gone")
		}
	}
}

func (m *mirrors) delete(ctx context.Context, mp *corev1.Pod, why string) {
	err := m.cs.CoreV1().Pods(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &mp.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		m.problem(mp.Namespace+"/"+mp.Name, fmt.Sprintf("delete mirror pod %s/%s: %v", mp.Namespace, mp.Name, err))
		return
	}
	m.logger.Printf("deleted mirror pod %s/%s: %s", mp.Namespace, mp.Name, why)
}

func (m *mirrors) problem(key, msg string) {
	if m.said == nil {
		m.said = map[string]string{}
	}
	if m.said[key] != msg {
		m.said[key] = msg
		m.logger.Print(msg)
	}
}

// mirrorPod is the mirror pod of a static pod.
func mirrorPod(st staticPodStatus, n *node) *corev1.Pod {
	annotations := map[string]string{}
	for k, v := range st.pod.Annotations {
		annotations[k] = v
	}
	annotations[mirrorAnnotation] = st.hash
	annotations[configHashAnnotation] = st.hash
	annotations[configSourceAnnotation] = "file"
	annotations[configSeenAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	spec := st.pod.Spec.DeepCopy()
	spec.NodeName = n.name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: mirrorName(st.pod, n), Namespace: st.pod.Namespace,
			Labels: st.pod.Labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.name, UID: n.uid, Controller: ptr.To(true)}},
		},
		Spec: *spec,
	}
}

// mirrorStatus is the status of a static pod as the kubelet reports it: a
// container is Started while its process runs and its startup probe has
// passed, and Ready once its readiness probe passes too.
func mirrorStatus(st staticPodStatus, n *node, prev corev1.PodStatus) corev1.PodStatus {
	now := metav1.Now()
	s := corev1.PodStatus{HostIP: n.hostIP(), PodIP: podIP, QOSClass: prev.QOSClass, StartTime: prev.StartTime}
	if st.pod.Spec.HostNetwork {
		s.PodIP = s.HostIP
	}
	s.HostIPs = []corev1.HostIP{{IP: s.HostIP}}
	s.PodIPs = []corev1.PodIP{{IP: s.PodIP}}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	ready, started, finished, failed := true, false, true, false
	for _, c := range st.containers {
		cs := corev1.ContainerStatus{Name: c.name, Image: c.image, RestartCount: int32(c.restarts), Ready: c.ready, Started: ptr.To(c.started)}
		var last *corev1.ContainerStateTerminated
		if c.last != nil {
			reason := "Error"
			if c.last.code == 0 {
				reason = "Completed"
			}
			last = &corev1.ContainerStateTerminated{ExitCode: int32(c.last.code), Reason: reason,
				StartedAt: metav1.NewTime(c.last.startedAt), FinishedAt: metav1.NewTime(c.last.finishedAt)}
			started = true
		}
		switch {
		case c.running:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
			started = true
		case c.finished && last != nil:
			cs.State.Terminated = last
			failed = failed || last.ExitCode != 0
			last = nil
		case last != nil:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off restarting failed container %s", c.name)}
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		if last != nil {
			cs.LastTerminationState.Terminated = last
		}
		ready = ready && c.ready
		finished = finished && c.finished
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
	}
	switch {
	case finished && failed:
		s.Phase = corev1.PodFailed
	case finished:
		s.Phase = corev1.PodSucceeded
	case started:
		s.Phase = corev1.PodRunning
	default:
		s.Phase = corev1.PodPending
	}
	status := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	for _, c := range []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: status(ready)},
		{Type: corev1.PodReady, Status: status(ready)},
	} {
		c.LastTransitionTime = now
		for _, p := range prev.Conditions {
			if p.Type == c.Type && p.Status == c.Status {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		s.Conditions = append(s.Conditions, c)
	}
	return s
}

// statusSummary is what of a pod status matters to whether it must be
// posted again.
func statusSummary(s corev1.PodStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s;", s.Phase, s.HostIP, s.PodIP)
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, "%s=%s,", c.Type, c.Status)
	}
	for _, c := range s.ContainerStatuses {
		fmt.Fprintf(&b, ";%s %t %d", c.Name, c.Ready, c.RestartCount)
		switch {
		case c.State.Running != nil:
			fmt.Fprintf(&b, " running@%d", c.State.Running.StartedAt.Unix())
		case c.State.Terminated != nil:
			fmt.Fprintf(&b, " exited:%d", c.State.Terminated.ExitCode)
		case c.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting:%s", c.State.Waiting.Reason)
		}
	}
	return b.String()
}
