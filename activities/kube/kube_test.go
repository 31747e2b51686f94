package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func fakeActs(objs ...*corev1.Node) (*Activities, *fake.Clientset) {
	cs := fake.NewClientset()
	for _, n := range objs {
		_, _ = cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	}
	return &Activities{Clients: func(Cluster) (kubernetes.Interface, error) { return cs, nil }, PollInterval: 10 * time.Millisecond}, cs
}

func node(name string, ready bool, version string) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
		NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: version},
	}}
}

func TestCordonIsIdempotent(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	ctx := context.Background()
	for i, want := range []bool{true, false} {
		res, err := a.Cordon(ctx, NodeInput{Node: "w1"})
		if err != nil || res.Changed != want {
			t.Errorf("cordon %d: %+v %v", i, res, err)
		}
	}
	n, _ := cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if !n.Spec.Unschedulable {
		t.Error("node not cordoned")
	}
	if res, err := a.Uncordon(ctx, NodeInput{Node: "w1"}); err != nil || !res.Changed {
		t.Errorf("uncordon: %+v %v", res, err)
	}
}

func TestMissingNodeIsNotRetried(t *testing.T) {
	a, _ := fakeActs()
	_, err := a.Cordon(context.Background(), NodeInput{Node: "ghost"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeNodeNotFound || !app.NonRetryable() {
		t.Errorf("got %v", err)
	}
	if res, err := a.DeleteNode(context.Background(), NodeInput{Node: "ghost"}); err != nil || res.Changed {
		t.Errorf("deleting a deleted node: %+v %v", res, err)
	}
}

func TestWaitNodeWaitsForVersion(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.3"))
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = cs.CoreV1().Nodes().UpdateStatus(context.Background(), node("w1", true, "v1.35.4"), metav1.UpdateOptions{})
	}()
	res, err := a.WaitNode(context.Background(), WaitNodeInput{Node: "w1", KubeletVersion: "v1.35.4", Timeout: "5s"})
	if err != nil || res.KubeletVersion != "v1.35.4" || !res.Ready {
		t.Errorf("%+v %v", res, err)
	}
	_, err = a.WaitNode(context.Background(), WaitNodeInput{Node: "w1", KubeletVersion: "v9.9.9", Timeout: "100ms"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeNotReady {
		t.Errorf("want NodeNotReady, got %v", err)
	}
}

func TestLabelTaint(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1"))
	ctx := context.Background()
	in := LabelTaintInput{Node: "w1", Labels: []string{"role=special", "node-role.kubernetes.io/controller="}, Taints: []string{"role=special:NoSchedule"}}
	for i, want := range []bool{true, false} {
		res, err := a.LabelTaint(ctx, in)
		if err != nil || res.Changed != want {
			t.Errorf("apply %d: %+v %v", i, res, err)
		}
	}
	n, _ := cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if _, ok := n.Labels["node-role.kubernetes.io/controller"]; !ok {
		t.Errorf("the empty-valued label is missing: %v", n.Labels)
	}
	if n.Labels["role"] != "special" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("node = %+v %+v", n.Labels, n.Spec.Taints)
	}
	if _, err := a.LabelTaint(ctx, LabelTaintInput{Node: "w1", Taints: []string{"bad"}}); err == nil {
		t.Error("bad taint accepted")
	}
}

// A Ready status the old kubelet posted before the restart does not
// count, even with the right version: only a heartbeat after it.
func TestWaitNodeWantsAHeartbeatAfterTheRestart(t *testing.T) {
	restart := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	stale := node("w1", true, "v1.35.4")
	stale.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(restart.Add(-5 * time.Second))
	a, cs := fakeActs(stale)
	in := WaitNodeInput{Node: "w1", KubeletVersion: "v1.35.4", ReadyAfter: restart.Format(time.RFC3339), Timeout: "100ms"}
	_, err := a.WaitNode(context.Background(), in)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeNotReady || !strings.Contains(err.Error(), "is before") {
		t.Fatalf("a heartbeat from before the restart: want NodeNotReady naming it, got %v", err)
	}
	// The new kubelet posts at start, often within the restart's own
	// second (heartbeats have whole seconds): that counts.
	fresh := node("w1", true, "v1.35.4")
	fresh.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(restart)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(context.Background(), fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	in.Timeout = "5s"
	if res, err := a.WaitNode(context.Background(), in); err != nil || !res.Ready {
		t.Errorf("a heartbeat after the restart: %+v %v", res, err)
	}
	in.ReadyAfter = "yesterday"
	if _, err := a.WaitNode(context.Background(), in); !errors.As(err, &app) || app.Type() != ErrTypeInvalidInput {
		t.Errorf("readyAfter that is not a time: %v", err)
	}
}

func TestGetNodeReportsAMissingNode(t *testing.T) {
	a, _ := fakeActs(node("w1", true, "v1.35.4"))
	res, err := a.GetNode(context.Background(), NodeInput{Node: "w1"})
	if err != nil || !res.Exists || !res.Ready || res.KubeletVersion != "v1.35.4" {
		t.Errorf("w1: %+v %v", res, err)
	}
	res, err = a.GetNode(context.Background(), NodeInput{Node: "gone"})
	if err != nil || res.Exists {
		t.Errorf("a missing node: %+v %v", res, err)
	}
}
