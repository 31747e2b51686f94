package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The simulator writes what a real kubelet writes, when it writes it:
// its status at start, at once when its network appears, again only when
// the Node differs from what it would post (an etcd restore put an old
// status back) or five minutes passed; its Lease every 10 s. Looking at
// the Node in between writes nothing.
func TestHeartbeatWritesAsTheRealKubeletDoes(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1"}})
	var writes []string
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if v := a.GetVerb(); v == "update" || v == "create" || v == "patch" {
			writes = append(writes, a.GetResource().Resource+"/"+a.GetSubresource()+" "+v)
		}
		return false, nil, nil
	})
	n := &node{name: "w1", version: "v1.35.4", ips: []string{"10.0.0.5"}, port: 10250}
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	step := func(at time.Duration, want ...string) {
		t.Helper()
		writes = nil
		if err := n.heartbeat(ctx, cs, t0.Add(at)); err != nil {
			t.Fatalf("at %s: %v", at, err)
		}
		if len(writes) != len(want) {
			t.Fatalf("at %s: wrote %v, want %v", at, writes, want)
		}
		for i := range want {
			if writes[i] != want[i] {
				t.Fatalf("at %s: wrote %v, want %v", at, writes, want)
			}
		}
	}
	ready := func() corev1.ConditionStatus {
		got, err := cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}

	step(0, "nodes/status update", "leases/ create")
	if ready() != corev1.ConditionFalse {
		t.Fatalf("without a network: Ready %s", ready())
	}
	step(2 * time.Second)
	n.network = "/etc/cni/net.d/10-bridge.conflist"
	step(4*time.Second, "nodes/status update")
	if ready() != corev1.ConditionTrue {
		t.Fatalf("with a network: Ready %s", ready())
	}
	step(6 * time.Second)
	step(10*time.Second, "leases/ update")
	step(14 * time.Second) // looked at, unchanged: nothing written
	step(20*time.Second, "leases/ update")

	// An old status put back under the simulator (a restore) is posted
	// over at the next look.
	cur, _ := cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	cur.Status.Conditions = nil
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	step(24*time.Second, "nodes/status update")
	if ready() != corev1.ConditionTrue {
		t.Fatalf("after a restore: Ready %s", ready())
	}
	step(30*time.Second, "leases/ update")
	step(5*time.Minute+30*time.Second, "nodes/status update", "leases/ update")
}
