package kubeapi

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/kube"
)

// An addon's image retagged: the container's image changes, the other
// containers' do not, and the step waits until the DaemonSet's pods are
// updated and available (as its controller reports), or says how far
// they got; a cluster without it changes nothing.
func TestSetWorkloadImageWaitsForTheRollout(t *testing.T) {
	a, cs := fakeActs()
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system", Generation: 1},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.35.4"}, {Name: "sidecar", Image: "example/sidecar:1"}}}}},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}}
	ctx := context.Background()
	if _, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := kube.SetWorkloadImageInput{Kind: "DaemonSet", Name: "kube-proxy", Container: "kube-proxy", Tag: "v1.36.3", Timeout: "10s"}
	res, err := a.SetWorkloadImage(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Present || !res.Changed || res.Previous != "registry.k8s.io/kube-proxy:v1.35.4" || res.Image != "registry.k8s.io/kube-proxy:v1.36.3" {
		t.Errorf("result %+v", res)
	}
	got, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]string{}
	for _, c := range got.Spec.Template.Spec.Containers {
		images[c.Name] = c.Image
	}
	if images["kube-proxy"] != "registry.k8s.io/kube-proxy:v1.36.3" || images["sidecar"] != "example/sidecar:1" {
		t.Errorf("containers after: %v", images)
	}
	// Again: nothing to change.
	if res, err := a.SetWorkloadImage(ctx, in); err != nil || res.Changed {
		t.Errorf("again: %+v %v", res, err)
	}
	// Never rolled out: named, with how far it got (its controller has
	// one pod of three on the image).
	got, err = cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status = appsv1.DaemonSetStatus{ObservedGeneration: got.Generation, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberAvailable: 3}
	if _, err := cs.AppsV1().DaemonSets("kube-system").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	in.Timeout = "100ms"
	if _, err := a.SetWorkloadImage(ctx, in); err == nil || !strings.Contains(err.Error(), "not rolled out to registry.k8s.io/kube-proxy:v1.36.3 within 100ms: 1 of 3 pods updated") {
		t.Errorf("a rollout that does not finish: %v", err)
	}
	// The controller, later, has every pod updated: the step waited for it.
	var updated atomic.Bool
	go func() {
		time.Sleep(50 * time.Millisecond)
		got.Status.UpdatedNumberScheduled = 3
		updated.Store(true)
		_, _ = cs.AppsV1().DaemonSets("kube-system").UpdateStatus(ctx, got, metav1.UpdateOptions{})
	}()
	in.Timeout = "10s"
	if _, err := a.SetWorkloadImage(ctx, in); err != nil || !updated.Load() {
		t.Errorf("the rollout finishing: %v, waited for it: %v", err, updated.Load())
	}
	// No such addon, and bad input.
	in.Name = "coredns"
	if res, err := a.SetWorkloadImage(ctx, in); err != nil || res.Present {
		t.Errorf("an addon the cluster does not run: %+v %v", res, err)
	}
	in.Name, in.Container = "kube-proxy", "nope"
	if _, err := a.SetWorkloadImage(ctx, in); err == nil || !strings.Contains(err.Error(), `has no container "nope"`) {
		t.Errorf("a container it does not have: %v", err)
	}
	in.Container = "kube-proxy"
	in.Tag = "v1.36.3;reboot"
	if _, err := a.SetWorkloadImage(ctx, in); err == nil || !strings.Contains(err.Error(), "is not an image reference") {
		t.Errorf("a tag that is no tag: %v", err)
	}
	in.Image = "x:1"
	if _, err := a.SetWorkloadImage(ctx, in); err == nil || !strings.Contains(err.Error(), "one of tag and image") {
		t.Errorf("tag and image: %v", err)
	}
}
