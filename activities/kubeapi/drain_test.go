package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// evictionAnswer answers one eviction of the fake API server: ev is the
// Eviction, before how many of that pod's evictions came before it.
type evictionAnswer func(tr k8stesting.ObjectTracker, ev *policyv1.Eviction, before int) error

// evictionDeletes is the API server's yes: the pod is deleted at once
// (as when its grace period is over), or 404 when it is not there.
func evictionDeletes(tr k8stesting.ObjectTracker, ev *policyv1.Eviction, _ int) error {
	return tr.Delete(podsGVR, ev.Namespace, ev.Name)
}

// evictions makes the fake API server answer evictions with answer; it
// returns the Evictions asked for so far.
func evictions(cs *fake.Clientset, answer evictionAnswer) func() []policyv1.Eviction {
	var mu sync.Mutex
	var asked []policyv1.Eviction
	cs.PrependReactor("create", "pods/eviction", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		mu.Lock()
		before := 0
		for _, e := range asked {
			if e.Namespace == ev.Namespace && e.Name == ev.Name {
				before++
			}
		}
		asked = append(asked, *ev.DeepCopy())
		mu.Unlock()
		return true, nil, answer(cs.Tracker(), ev, before)
	})
	return func() []policyv1.Eviction { mu.Lock(); defer mu.Unlock(); return slices.Clone(asked) }
}

// refusedByBudget is the API server's answer to an eviction a
// PodDisruptionBudget does not allow.
func refusedByBudget() error {
	return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
}

// managedPod is a running pod of a ReplicaSet on node, in default.
func managedPod(node, name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			Labels:          map[string]string{"app": strings.Split(name, "-")[0]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func unmanaged(p *corev1.Pod) { p.OwnerReferences = nil }

func withEmptyDir(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
}

func ofDaemonSet(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, Controller: ptr.To(true)}}
	}
}

func create(t *testing.T, cs *fake.Clientset, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(cs *fake.Clientset, ns, name string) bool {
	_, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil
}

// The node is cordoned before any eviction; a DaemonSet's pods and mirror
// pods stay, as do other nodes' pods; the rest is evicted.
func TestDrainCordonsThenLeavesDaemonSetAndMirrorPods(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"), node("w2", true, "v1.35.4"))
	ctx := context.Background()
	agent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent"}}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, agent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mirror := managedPod("w1", "kube-apiserver-w1", unmanaged, func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	})
	create(t, cs, managedPod("w1", "agent-x", ofDaemonSet("agent")), mirror, managedPod("w1", "web-1"), managedPod("w2", "web-2"))
	asked := evictions(cs, evictionDeletes)

	res, err := a.Drain(ctx, kube.DrainInput{Node: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Evicted, []string{"default/web-1"}) {
		t.Errorf("evicted %v, want default/web-1 only", res.Evicted)
	}
	for _, name := range []string{"agent-x", "kube-apiserver-w1", "web-2"} {
		if !exists(cs, "default", name) {
			t.Errorf("%s was evicted", name)
		}
	}
	if n := len(asked()); n != 1 {
		t.Errorf("%d evictions asked for, want 1: %+v", n, asked())
	}
	cordoned, evicted := -1, -1
	for i, act := range cs.Actions() {
		switch {
		case act.GetVerb() == "patch" && act.GetResource().Resource == "nodes" && cordoned < 0:
			cordoned = i
		case act.GetSubresource() == "eviction" && evicted < 0:
			evicted = i
		}
	}
	if cordoned < 0 || evicted < 0 || cordoned > evicted {
		t.Errorf("cordon at action %d, first eviction at %d: want the cordon first", cordoned, evicted)
	}
	if n, _ := cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{}); !n.Spec.Unschedulable {
		t.Error("w1 is not cordoned")
	}
}

// Pods no controller manages, pods of a DaemonSet that is gone and
// running pods with emptyDir data are refused, and nothing at all is
// evicted, unless the input allows them; finished pods are always
// evicted.
func TestDrainRefusesWhatTheInputDoesNotAllow(t *testing.T) {
	finished := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	for _, c := range []struct {
		name  string
		pod   *corev1.Pod
		allow func(*kube.DrainInput)
		why   string
	}{
		{"unmanaged", managedPod("w1", "lonely", unmanaged), func(in *kube.DrainInput) { in.Force = true }, "force"},
		{"emptyDir", managedPod("w1", "cache-1", withEmptyDir), func(in *kube.DrainInput) { in.DeleteEmptyDirData = true }, "deleteEmptyDirData"},
		{"gone DaemonSet", managedPod("w1", "orphan-1", ofDaemonSet("gone")), func(in *kube.DrainInput) { in.Force = true }, "DaemonSet that is gone"},
		{"finished", managedPod("w1", "job-1", unmanaged, withEmptyDir, finished), nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, cs := fakeActs(node("w1", true, "v1.35.4"))
			create(t, cs, c.pod, managedPod("w1", "web-1"))
			asked := evictions(cs, evictionDeletes)
			in := kube.DrainInput{Node: "w1", Timeout: "2s"}
			res, err := a.Drain(context.Background(), in)
			if c.allow == nil {
				if err != nil || len(res.Evicted) != 2 {
					t.Fatalf("got %+v %v, want both pods evicted", res, err)
				}
				return
			}
			name := "default/" + c.pod.Name
			if !errtype.Is(err, errtype.KubernetesAPI) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want the drain refused naming %s and %q", err, name, c.why)
			}
			if n := len(asked()); n != 0 {
				t.Errorf("a refused drain asked for %d evictions", n)
			}
			c.allow(&in)
			res, err = a.Drain(context.Background(), in)
			if err != nil || !slices.Contains(res.Evicted, name) {
				t.Errorf("allowed: %+v %v, want %s evicted", res, err, name)
			}
		})
	}
}

// A budget that refuses until the drain's timeout fails it as
// DrainBlocked, naming the pod and the budget; the pod stays.
func TestDrainBlockedByABudgetUntilItsTimeout(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	ctx := context.Background()
	create(t, cs, managedPod("w1", "guarded-1"))
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded-pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	asked := evictions(cs, func(k8stesting.ObjectTracker, *policyv1.Eviction, int) error { return refusedByBudget() })
	start := time.Now()
	// 2s: a drain's shortest (minLastLook).
	_, err := within(t, 15*time.Second, func() (kube.DrainResult, error) {
		return a.Drain(ctx, kube.DrainInput{Node: "w1", Timeout: "2s", RetryDelay: "100ms"})
	})
	took := time.Since(start)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, errtype.DrainBlocked) || !app.NonRetryable() {
		t.Fatalf("got %v, want a DrainBlocked error", err)
	}
	for _, want := range []string{"default/guarded-pdb (0 disruptions allowed)", "pods left default/guarded-1", "timed out after", "disruption budget"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	var details map[string]any
	if err := app.Details(&details); err != nil || fmt.Sprint(details["pods"]) != "[default/guarded-1]" || !strings.Contains(fmt.Sprint(details["budgets"]), "default/guarded-pdb") {
		t.Errorf("details %v (%v), want the pod and the budget", details, err)
	}
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("gave up after %s, the timeout is 2s", took)
	}
	if n := len(asked()); n < 10 || n > 21 {
		t.Errorf("asked %d times in 2s, want one every 100ms", n)
	}
	if !exists(cs, "default", "guarded-1") {
		t.Error("the guarded pod is gone")
	}
}

// Refused twice, then allowed: the drain asks again every RetryDelay.
func TestDrainAsksAgainWhileABudgetRefuses(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	create(t, cs, managedPod("w1", "web-1"))
	asked := evictions(cs, func(tr k8stesting.ObjectTracker, ev *policyv1.Eviction, before int) error {
		if before < 2 {
			return refusedByBudget()
		}
		return evictionDeletes(tr, ev, before)
	})
	start := time.Now()
	res, err := a.Drain(context.Background(), kube.DrainInput{Node: "w1", Timeout: "5s", RetryDelay: "100ms"})
	if err != nil || !slices.Equal(res.Evicted, []string{"default/web-1"}) {
		t.Fatalf("%+v %v", res, err)
	}
	if n := len(asked()); n != 3 {
		t.Errorf("asked %d times, want 3 (2 refused)", n)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("done in %s: the refusals were not waited for (100ms each)", d)
	}
}

// An accepted eviction is not the end: the drain waits until the pod is
// gone, or replaced by another pod of its name (a new UID).
func TestDrainWaitsUntilTheEvictedPodIsGone(t *testing.T) {
	for _, replaced := range []bool{false, true} {
		t.Run(fmt.Sprintf("replaced=%t", replaced), func(t *testing.T) {
			a, cs := fakeActs(node("w1", true, "v1.35.4"))
			create(t, cs, managedPod("w1", "db-0"))
			var mu sync.Mutex
			var goneAt time.Time
			evictions(cs, func(tr k8stesting.ObjectTracker, ev *policyv1.Eviction, _ int) error {
				go func() { // the kubelet stops it in its grace period
					time.Sleep(200 * time.Millisecond)
					mu.Lock()
					defer mu.Unlock()
					// Taken before the pod goes: the drain may see it gone
					// before this goroutine runs again.
					goneAt = time.Now()
					_ = tr.Delete(podsGVR, ev.Namespace, ev.Name)
					if replaced { // as a StatefulSet does, on another node
						p := managedPod("w2", "db-0")
						p.UID = "uid-new"
						_ = tr.Add(p)
					}
				}()
				return nil
			})
			res, err := a.Drain(context.Background(), kube.DrainInput{Node: "w1", Timeout: "5s"})
			done := time.Now()
			if err != nil || !slices.Equal(res.Evicted, []string{"default/db-0"}) {
				t.Fatalf("%+v %v", res, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if goneAt.IsZero() || done.Before(goneAt) {
				t.Errorf("the drain ended at %s, the pod went at %s", done.Format(time.StampMilli), goneAt.Format(time.StampMilli))
			}
		})
	}
}

// An eviction answered 404 is a pod gone already: not an error, and not
// one the drain evicted.
func TestDrainTakesAnEvictionNotFoundAsGone(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	create(t, cs, managedPod("w1", "web-1"))
	evictions(cs, func(_ k8stesting.ObjectTracker, ev *policyv1.Eviction, _ int) error {
		return apierrors.NewNotFound(corev1.Resource("pods"), ev.Name)
	})
	res, err := within(t, 5*time.Second, func() (kube.DrainResult, error) {
		return a.Drain(context.Background(), kube.DrainInput{Node: "w1", Timeout: "5s"})
	})
	if err != nil || len(res.Evicted) != 0 {
		t.Errorf("%+v %v, want success with nothing evicted", res, err)
	}
}

// gracePeriodSeconds goes into each Eviction; unset, each pod keeps its own.
func TestDrainPassesTheGracePeriod(t *testing.T) {
	for _, c := range []struct {
		in   int
		want *int64
	}{{7, ptr.To[int64](7)}, {0, nil}} {
		a, cs := fakeActs(node("w1", true, "v1.35.4"))
		create(t, cs, managedPod("w1", "web-1"))
		asked := evictions(cs, evictionDeletes)
		if _, err := a.Drain(context.Background(), kube.DrainInput{Node: "w1", GracePeriodSeconds: c.in}); err != nil {
			t.Fatal(err)
		}
		evs := asked()
		if len(evs) != 1 || evs[0].DeleteOptions == nil {
			t.Fatalf("gracePeriodSeconds %d: evictions %+v", c.in, evs)
		}
		if got := evs[0].DeleteOptions.GracePeriodSeconds; (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("gracePeriodSeconds %d: the eviction's grace period is %v, want %v", c.in, ptr.Deref(got, -1), ptr.Deref(c.want, -1))
		}
	}
}

// Only the drain's own deadline is context.DeadlineExceeded: a request
// the client stopped waiting for is an API server away, waited out.
func TestDrainDeadlineIsDeadlineExceededAndARequestTimeoutIsNot(t *testing.T) {
	_, cs := fakeActs(node("w1", true, "v1.35.4"))
	create(t, cs, managedPod("w1", "web-1"))
	// Accepted, never gone.
	evictions(cs, func(k8stesting.ObjectTracker, *policyv1.Eviction, int) error { return nil })
	opts := drainOptions{Node: "w1", Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond}
	err := drainNode(context.Background(), cs, opts)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "default/web-1: evicted, still there at the deadline") {
		t.Errorf("past the deadline: %v, want context.DeadlineExceeded naming the pod", err)
	}

	clientTimeout := &url.Error{Op: "Post", URL: "https://10.0.0.1:6443/api/v1/namespaces/default/pods/web-1/eviction", Err: context.DeadlineExceeded}
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	create(t, cs, managedPod("w1", "web-1"))
	asked := evictions(cs, func(tr k8stesting.ObjectTracker, ev *policyv1.Eviction, before int) error {
		if before < 2 {
			return clientTimeout
		}
		return evictionDeletes(tr, ev, before)
	})
	opts.Timeout = 5 * time.Second
	err = drainNode(context.Background(), cs, opts)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !away(err) {
		t.Errorf("a request timeout: %v, want an API server away, not the deadline", err)
	}
	res, err := a.Drain(context.Background(), kube.DrainInput{Node: "w1", Timeout: "5s"})
	if err != nil || !slices.Equal(res.Evicted, []string{"default/web-1"}) || len(asked()) != 3 {
		t.Errorf("drain across a request timeout: %+v %v after %d evictions", res, err, len(asked()))
	}
}

// A pod already being deleted in a namespace being deleted: the eviction
// is forbidden, and the drain waits for the pod to go.
func TestDrainWaitsForAPodOfATerminatingNamespace(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	create(t, cs, managedPod("w1", "web-1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }))
	evictions(cs, func(tr k8stesting.ObjectTracker, ev *policyv1.Eviction, before int) error {
		if before == 0 {
			go func() { time.Sleep(100 * time.Millisecond); _ = tr.Delete(podsGVR, ev.Namespace, ev.Name) }()
		}
		err := apierrors.NewForbidden(corev1.Resource("pods"), ev.Name, errors.New("namespace default is being terminated"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
		return err
	})
	res, err := a.Drain(context.Background(), kube.DrainInput{Node: "w1", Timeout: "5s"})
	if err != nil || !slices.Equal(res.Evicted, []string{"default/web-1"}) {
		t.Errorf("%+v %v", res, err)
	}
}
