package kubeapi

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
)

// resumedEnv is an activity environment whose attempt follows a lost one
// that heartbeated details.
func resumedEnv(a *Activities, details any) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetHeartbeatDetails(details)
	env.RegisterActivityWithOptions(a.Drain, activity.RegisterOptions{Name: "kube.drain"})
	env.RegisterActivityWithOptions(a.WaitNode, activity.RegisterOptions{Name: "kube.wait-node"})
	return env
}

func pod(node, ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

// within fails the test when run does not return in d: a resumed
// deadline ends an activity at once, a restarted one would not.
func within[T any](t *testing.T, d time.Duration, run func() (T, error)) (T, error) {
	t.Helper()
	type out struct {
		v   T
		err error
	}
	done := make(chan out, 1)
	go func() { v, err := run(); done <- out{v, err} }()
	select {
	case o := <-done:
		return o.v, o.err
	case <-time.After(d):
		t.Fatalf("still running after %s: the deadline was not kept", d)
		panic("unreachable")
	}
}

func TestADrainResumesWithThePodsALostAttemptEvicted(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	evictions(cs, evictionDeletes)
	_, _ = cs.CoreV1().Pods("default").Create(context.Background(), pod("w1", "default", "b"), metav1.CreateOptions{})
	env := resumedEnv(a, drainProgress{StartedAt: time.Now().Add(-time.Minute), Evicted: []string{"default/a"}})
	var beats []drainProgress
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p drainProgress
		_ = d.Get(&p)
		beats = append(beats, p)
	})
	v, err := env.ExecuteActivity("kube.drain", kube.DrainInput{Node: "w1", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	var res kube.DrainResult
	_ = v.Get(&res)
	if !slices.Equal(res.Evicted, []string{"default/a", "default/b"}) {
		t.Errorf("evicted %v, want the lost attempt's default/a and default/b", res.Evicted)
	}
	if len(beats) == 0 || !slices.Contains(beats[len(beats)-1].Evicted, "default/a") || time.Since(beats[0].StartedAt) < time.Minute {
		t.Errorf("heartbeats %+v do not carry the first attempt's start and pods", beats)
	}
}

func TestADrainResumedPastItsDeadlineLooksOnceAndStops(t *testing.T) {
	a, cs := fakeActs(node("w1", true, "v1.35.4"))
	_, _ = cs.CoreV1().Pods("default").Create(context.Background(), pod("w1", "default", "stuck"), metav1.CreateOptions{})
	// The pod never goes: its eviction is accepted and nothing happens
	// (the fake API server's own answer).
	env := resumedEnv(a, drainProgress{StartedAt: time.Now().Add(-10 * time.Minute)})
	_, err := within(t, time.Minute, func() (any, error) {
		return env.ExecuteActivity("kube.drain", kube.DrainInput{Node: "w1", Timeout: "5m", Force: true})
	})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want the drain to fail at its first attempt's deadline", err)
	}
}

func TestAWaitResumedPastItsDeadlineStops(t *testing.T) {
	a, _ := fakeActs(node("w1", false, "v1.35.4"))
	env := resumedEnv(a, waitProgress{StartedAt: time.Now().Add(-10 * time.Minute)})
	_, err := within(t, time.Minute, func() (any, error) {
		return env.ExecuteActivity("kube.wait-node", kube.WaitNodeInput{Node: "w1", Timeout: "5m"})
	})
	if !errtype.Is(err, errtype.NodeNotReady) {
		t.Fatalf("got %v, want NotReady at the first attempt's deadline", err)
	}
	// A start in the future (a clock ahead) is not taken.
	a, _ = fakeActs(node("w2", true, "v1.35.4"))
	env = resumedEnv(a, waitProgress{StartedAt: time.Now().Add(time.Hour)})
	if _, err := env.ExecuteActivity("kube.wait-node", kube.WaitNodeInput{Node: "w2", Timeout: "5m"}); err != nil {
		t.Fatal(err)
	}
}
