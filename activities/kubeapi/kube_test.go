package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/target"
)

func fakeActs(objs ...*corev1.Node) (*Activities, *fake.Clientset) {
	cs := fake.NewClientset()
	for _, n := range objs {
		_, _ = cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	}
	return &Activities{Clients: func(target.Kube) (kubernetes.Interface, error) { return cs, nil }, PollInterval: 10 * time.Millisecond}, cs
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
		res, err := a.Cordon(ctx, kube.NodeInput{Node: "w1"})
		if err != nil || res.Changed != want {
			t.Errorf("cordon %d: %+v %v", i, res, err)
		}
	}
	n, _ := cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if !n.Spec.Unschedulable {
		t.Error("node not cordoned")
	}
	if res, err := a.Uncordon(ctx, kube.NodeInput{Node: "w1"}); err != nil || !res.Changed {
		t.Errorf("uncordon: %+v %v", res, err)
	}
}

func TestMissingNodeIsNotRetried(t *testing.T) {
	a, _ := fakeActs()
	_, err := a.Cordon(context.Background(), kube.NodeInput{Node: "ghost"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, errtype.NodeNotFound) || !app.NonRetryable() {
		t.Errorf("got %v", err)
	}
	if res, err := a.DeleteNode(context.Background(), kube.NodeInput{Node: "ghost"}); err != nil || res.Changed {
		t.Errorf("deleting a deleted node: %+v %v", res, err)
	}
}

// The Node of a host that is gone is deleted by its name; a second
// delete is success; no name is refused.
func TestDeleteLostNode(t *testing.T) {
	a, cs := fakeActs(node("tyc2.example.com", false, "v1.35.4"))
	ctx := context.Background()
	if res, err := a.DeleteLostNode(ctx, kube.DeleteLostNodeInput{Name: "tyc2.example.com"}); err != nil || !res.Changed {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "tyc2.example.com", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Node after its delete: %v", err)
	}
	if res, err := a.DeleteLostNode(ctx, kube.DeleteLostNodeInput{Name: "tyc2.example.com"}); err != nil || res.Changed {
		t.Errorf("a second delete: %+v %v", res, err)
	}
	var app *temporal.ApplicationError
	if _, err := a.DeleteLostNode(ctx, kube.DeleteLostNodeInput{Name: " "}); !errors.As(err, &app) || !app.NonRetryable() {
		t.Errorf("no name: %v", err)
	}
	// A name from a param is a Node's name, never a path.
	for _, name := range []string{"../namespaces/kube-system", "tyc2/status", "TYC2"} {
		if _, err := a.DeleteLostNode(ctx, kube.DeleteLostNodeInput{Name: name}); !errtype.Is(err, errtype.InvalidInput) {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

func TestWaitNodeWaitsForVersion(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.3"))
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = cs.CoreV1().Nodes().UpdateStatus(context.Background(), node("w1", true, "v1.35.4"), metav1.UpdateOptions{})
	}()
	res, err := a.WaitNode(context.Background(), kube.WaitNodeInput{Node: "w1", KubeletVersion: "v1.35.4", Timeout: "5s"})
	if err != nil || res.KubeletVersion != "v1.35.4" || !res.Ready {
		t.Errorf("%+v %v", res, err)
	}
	_, err = a.WaitNode(context.Background(), kube.WaitNodeInput{Node: "w1", KubeletVersion: "v9.9.9", Timeout: "100ms"})
	if !errtype.Is(err, errtype.NodeNotReady) {
		t.Errorf("want NodeNotReady, got %v", err)
	}
}

func TestLabelTaint(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1"))
	ctx := context.Background()
	in := kube.LabelTaintInput{Node: "w1", Labels: []string{"role=special", "node-role.kubernetes.io/controller="}, Taints: []string{"role=special:NoSchedule"}}
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
	if _, err := a.LabelTaint(ctx, kube.LabelTaintInput{Node: "w1", Taints: []string{"bad"}}); err == nil {
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
	in := kube.WaitNodeInput{Node: "w1", KubeletVersion: "v1.35.4", ReadyAfter: restart.Format(time.RFC3339), Timeout: "100ms"}
	_, err := a.WaitNode(context.Background(), in)
	if !errtype.Is(err, errtype.NodeNotReady) || !strings.Contains(err.Error(), "is before") {
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
	if _, err := a.WaitNode(context.Background(), in); !errtype.Is(err, errtype.InvalidInput) {
		t.Errorf("readyAfter that is not a time: %v", err)
	}
}

// After a reboot, a Ready status counts only once the Node reports the
// new boot: one the kubelet of the boot before posted, even after
// readyAfter, does not.
func TestWaitNodeWantsTheNewBoot(t *testing.T) {
	before := node("w1", true, "v1.35.4")
	before.Status.NodeInfo.BootID = "3b1f0f3c-old"
	a, cs := fakeActs(before)
	in := kube.WaitNodeInput{Node: "w1", BootID: "9d2c7a11-new", Timeout: "100ms"}
	if _, err := a.WaitNode(context.Background(), in); !errtype.Is(err, errtype.NodeNotReady) || !strings.Contains(err.Error(), `status of boot "3b1f0f3c-old", not 9d2c7a11-new`) {
		t.Fatalf("a status of the boot before: want NodeNotReady naming it, got %v", err)
	}
	after := node("w1", true, "v1.35.4")
	after.Status.NodeInfo.BootID = "9d2c7a11-new"
	if _, err := cs.CoreV1().Nodes().UpdateStatus(context.Background(), after, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	in.Timeout = "5s"
	if res, err := a.WaitNode(context.Background(), in); err != nil || !res.Ready {
		t.Errorf("the new boot's status: %+v %v", res, err)
	}
}

// After an etcd restore the Node's Ready condition is the snapshot's:
// with leaseAfter only a Lease the kubelet renewed since counts.
func TestWaitNodeWantsALeaseRenewedAfter(t *testing.T) {
	started := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	ctx := context.Background()
	in := kube.WaitNodeInput{Node: "w1", LeaseAfter: started.Format(time.RFC3339), Timeout: "100ms"}
	var app *temporal.ApplicationError
	if _, err := a.WaitNode(ctx, in); !errtype.Is(err, errtype.NodeNotReady) || !strings.Contains(err.Error(), "Lease") {
		t.Fatalf("no Lease: want NodeNotReady naming it, got %v", err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: started.Add(-3 * time.Second)}}}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitNode(ctx, in); !errors.As(err, &app) || !strings.Contains(err.Error(), "last renewed 2026-11-27T06:59:57Z, before") {
		t.Fatalf("a Lease renewed before: want NodeNotReady naming it, got %v", err)
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: started.Add(400 * time.Millisecond)}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := a.WaitNode(ctx, in); err != nil || !res.Ready {
		t.Errorf("a Lease renewed after: %+v %v", res, err)
	}
	in.LeaseAfter = "soon"
	if _, err := a.WaitNode(ctx, in); !errtype.Is(err, errtype.InvalidInput) {
		t.Errorf("leaseAfter that is not a time: %v", err)
	}
}

func TestGetNodeReportsAMissingNode(t *testing.T) {
	w1 := node("w1", true, "v1.35.4")
	w1.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "w1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.7"}}
	a, _ := fakeActs(w1)
	res, err := a.GetNode(context.Background(), kube.NodeInput{Node: "w1"})
	if err != nil || !res.Exists || !res.Ready || res.KubeletVersion != "v1.35.4" || res.InternalIP != "10.0.0.7" {
		t.Errorf("w1: %+v %v", res, err)
	}
	res, err = a.GetNode(context.Background(), kube.NodeInput{Node: "gone"})
	if err != nil || res.Exists {
		t.Errorf("a missing node: %+v %v", res, err)
	}
}

// refuse makes the fake API server refuse connections for verb on
// resource n times, as a restarting kube-apiserver does.
func refuse(cs *fake.Clientset, verb, resource string, n int) *int {
	calls := 0
	cs.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls <= n {
			return true, nil, &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api/v1/nodes/w1",
				Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
		}
		return false, nil, nil
	})
	return &calls
}

func TestNodeActionsWaitOutAnAPIServerThatIsAway(t *testing.T) {
	ctx := context.Background()
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	calls := refuse(cs, "patch", "nodes", 3)
	if res, err := a.Cordon(ctx, kube.NodeInput{Node: "w1"}); err != nil || !res.Changed {
		t.Fatalf("cordon across 3 refused connections: %+v %v", res, err)
	}
	if *calls != 4 {
		t.Errorf("patched %d times, want 4 (3 refused, then one answered)", *calls)
	}

	refuse(cs, "get", "nodes", 2)
	if res, err := a.Drain(ctx, kube.DrainInput{Node: "w1"}); err != nil {
		t.Fatalf("drain across 2 refused connections: %+v %v", res, err)
	}
	refuse(cs, "delete", "nodes", 2)
	if res, err := a.DeleteNode(ctx, kube.NodeInput{Node: "w1"}); err != nil || !res.Changed {
		t.Fatalf("delete across 2 refused connections: %+v %v", res, err)
	}

	// Away for longer than APIOutage: the refusal is the answer, and
	// retryable (the step's own retries may outlast the outage).
	a, cs = fakeActs(node("w2", true, "v1.35.4"))
	a.APIOutage = 50 * time.Millisecond
	refuse(cs, "get", "nodes", 1000)
	start := time.Now()
	_, err := a.Uncordon(ctx, kube.NodeInput{Node: "w2"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.NonRetryable() || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %s, APIOutage is 50ms", d)
	}

	// An answer that is no (Forbidden) is not asked again.
	a, cs = fakeActs(node("w3", true, "v1.35.4"))
	forbidden := 0
	cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		forbidden++
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "w3", errors.New("RBAC"))
	})
	if _, err := a.Cordon(ctx, kube.NodeInput{Node: "w3"}); err == nil || forbidden != 1 {
		t.Errorf("forbidden: asked %d times, %v", forbidden, err)
	}
}

func TestAway(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name string
		err  error
		away bool
	}{
		{"connection refused", refused, true},
		{"refused, wrapped by the drainer", fmt.Errorf("evict default/x: %w", &url.Error{Op: "Post", URL: "https://h:6443/...", Err: refused}), true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"i/o timeout", &url.Error{Op: "Get", URL: "https://h:6443/...", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}}, true},
		{"closed connection", fmt.Errorf("watch: %w", net.ErrClosed), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"http2 ping unanswered", &url.Error{Op: "Get", URL: "https://h:6443/...", Err: errors.New("http2: client connection lost")}, true},
		{"canceled waiting for a connection", &url.Error{Op: "Get", URL: "https://h:6443/...", Err: errors.New("net/http: request canceled while waiting for connection")}, true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"404", apierrors.NewNotFound(corev1.Resource("nodes"), "x"), false},
		{"403", apierrors.NewForbidden(corev1.Resource("nodes"), "x", errors.New("no")), false},
		// The API server answered: a webhook it called refused it. Read
		// by its text, this was an API server away, waited out for
		// APIOutage.
		{"500 naming a refused webhook", apierrors.NewInternalError(errors.New(`failed calling webhook "validate.example.com": failed to call webhook: Post "https://webhook.example.svc:443/validate?timeout=10s": dial tcp 10.96.0.10:443: connect: connection refused`)), false},
		{"500 naming a webhook timeout", apierrors.NewInternalError(errors.New(`failed calling webhook "validate.example.com": Post "https://webhook.example.svc:443/validate": dial tcp 10.96.0.10:443: i/o timeout`)), false},
		// Text alone is not read: the drainer keeps its causes' types
		// (kubectl's drain, which flattened them with %v, is gone).
		{"text alone", errors.New(`error when evicting pods/"x" -n "default": Post "https://h:6443/...": dial tcp h:6443: connect: connection refused`), false},
		{"canceled", context.Canceled, false},
		{"the drain's own time", &drainTimedOut{after: time.Minute, err: context.DeadlineExceeded}, false},
		{"an answer", errors.New("drain did not complete within 5m0s"), false},
		{"nil", nil, false},
	} {
		if got := away(c.err); got != c.away {
			t.Errorf("%s: away(%v) = %v, want %v", c.name, c.err, got, c.away)
		}
	}
}
