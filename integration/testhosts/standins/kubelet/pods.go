package main

import (
	"context"
	"log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// podIP is the address the simulator gives pods scheduled to it; nothing
// listens there.
const podIP = "10.244.0.10"

// mirrorAnnotation marks a mirror pod; its value is the static pod's hash.
const mirrorAnnotation = corev1.MirrorPodAnnotationKey

// nodePods lists the pods bound to the node.
func nodePods(ctx context.Context, cs kubernetes.Interface, n *node) ([]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// runScheduled "runs" the pods scheduled to the node: each is marked
// Running with every container Ready (nothing is started); without a CNI
// network, only host-network pods. It completes the
// deletion of pods being deleted (evicted, drained), mirror pods included.
// Mirror pods are otherwise left to syncMirrors.
func runScheduled(ctx context.Context, cs kubernetes.Interface, n *node, pods []corev1.Pod, logger *log.Logger) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
			if err != nil && !apierrors.IsNotFound(err) {
				logger.Printf("delete pod %s/%s: %v", p.Namespace, p.Name, err)
			}
			continue
		}
		if _, mirror := p.Annotations[mirrorAnnotation]; mirror || p.Status.Phase == corev1.PodRunning {
			continue
		}
		// Without a network only pods of the host's network start.
		if n.network == "" && !p.Spec.HostNetwork {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.HostIP = podIP, n.hostIP()
		p.Status.StartTime = &now
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		var cst []corev1.ContainerStatus
		for _, c := range p.Spec.Containers {
			cst = append(cst, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		p.Status.ContainerStatuses = cst
		if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			logger.Printf("run pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
}
