package kubeapi

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/kube"
)

// kube-proxy (a DaemonSet) and CoreDNS (a Deployment) are restarted once
// per mark and waited for; one that does not roll out fails the wait
// naming it; a namespace that is no name is refused before any call.
func TestRestartWorkloads(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	one := int32(1)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Spec: appsv1.DeploymentSpec{Replicas: &one},
		Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}, Spec: appsv1.DeploymentSpec{Replicas: &one}}
	if _, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*appsv1.Deployment{dep, other} {
		if _, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	in := kube.RestartWorkloadsInput{Namespaces: []string{"kube-system"}, Mark: "ca-rotation issuer-2", Timeout: "1m"}
	res, err := a.RestartWorkloads(ctx, in)
	if err != nil || !slices.Equal(res.Restarted, []string{"kube-system/daemonset/kube-proxy", "kube-system/deployment/coredns"}) {
		t.Fatalf("restart: %+v %v", res, err)
	}
	got, _ := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if got.Spec.Template.Annotations[restartMark] != in.Mark {
		t.Errorf("kube-proxy's pod template: %v", got.Spec.Template.Annotations)
	}
	if d, _ := cs.AppsV1().Deployments("default").Get(ctx, "app", metav1.GetOptions{}); d.Spec.Template.Annotations[restartMark] != "" {
		t.Error("a Deployment of another namespace restarted")
	}
	if again, err := a.RestartWorkloads(ctx, in); err != nil || len(again.Restarted) != 0 {
		t.Errorf("the same mark again: %+v %v", again, err)
	}

	in.Namespaces, in.Mark, in.Timeout = []string{"default"}, "another", "50ms"
	_, err = a.RestartWorkloads(ctx, in)
	if err == nil || !strings.Contains(err.Error(), "default/deployment/app (0 of 0 updated and available)") {
		t.Errorf("a Deployment that does not roll out: %v", err)
	}
	before := len(cs.Actions())
	in.Namespaces = []string{"Kube System"}
	if _, err := a.RestartWorkloads(ctx, in); err == nil || len(cs.Actions()) != before {
		t.Errorf("a namespace that is no name: %v, %d calls", err, len(cs.Actions())-before)
	}
}
