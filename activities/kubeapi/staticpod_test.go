package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/render"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/target"
)

// mirrorPod is a static pod's mirror pod as the kubelet reports it, one
// container in the given state.
func mirrorPod(restartedAt string, restarts int32, running bool) *corev1.Pod {
	cs := corev1.ContainerStatus{Name: "kube-apiserver", RestartCount: restarts, Ready: running}
	if running {
		cs.State.Running = &corev1.ContainerStateRunning{}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "E1127 run.go:72] \"command failed\" err=\"open /etc/kubernetes/pki/apiserver.key: permission denied\""}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-tyc1", Namespace: "kube-system", Annotations: map[string]string{layout.RestartedAtAnnotation: restartedAt}},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}},
	}
}

// A restarted API server that keeps exiting fails the wait at its third
// exit, not retried, with how it last ended, not after the timeout.
func TestWaitStaticPodGivesUpOnACrashLoop(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, mirrorPod("t1", 1, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, mirrorPod("t1", 4, false), metav1.UpdateOptions{})
	}()
	began := time.Now()
	_, err := a.WaitStaticPod(ctx, kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", RestartedAt: "t1", Timeout: "1m"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, errtype.CrashLooping) || !app.NonRetryable() {
		t.Fatalf("want a non-retryable %s, got %v", errtype.CrashLooping, err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("gave up after %s", took)
	}
	for _, want := range []string{"kube-system/kube-apiserver-tyc1 is crash-looping", "container kube-apiserver restarted 4 times (3 since the wait began)", "last exited 1 (Error)",
		"apiserver.key: permission denied", "[CrashLoopBackOff]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// A controller manager that exited three times while the API server it
// talks to restarted, before the wait could see it (the wait asks that API
// server), is no crash loop: once the API server answers it runs. A
// cert-renewal once failed here and undid the renewal.
func TestWaitStaticPodCountsOnlyExitsItSaw(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, mirrorPod("t1", 3, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, mirrorPod("t1", 4, true), metav1.UpdateOptions{})
	}()
	res, err := a.WaitStaticPod(ctx, kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", RestartedAt: "t1", Timeout: "10s"})
	if err != nil || !res.Ready || res.Restarts != 4 {
		t.Fatalf("%+v %v", res, err)
	}
}

// A container that exited once or twice and then runs is waited for; the
// pod from before the restart does not count, however it fares.
func TestWaitStaticPodWaitsOutAFewRestarts(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, mirrorPod("t1", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, mirrorPod("t1", 2, true), metav1.UpdateOptions{})
	}()
	res, err := a.WaitStaticPod(ctx, kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", RestartedAt: "t1", Timeout: "10s"})
	if err != nil || !res.Ready || res.Restarts != 2 {
		t.Fatalf("%+v %v", res, err)
	}

	if _, err := cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, mirrorPod("t0", 9, false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = a.WaitStaticPod(ctx, kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", RestartedAt: "t1", Timeout: "200ms"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, errtype.NodeNotReady) || app.NonRetryable() {
		t.Errorf("the pod before the restart: want a retryable %s, got %v", errtype.NodeNotReady, err)
	}
	// maxRestarts -1 waits out the timeout.
	if _, err := cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, mirrorPod("t1", 9, false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = a.WaitStaticPod(ctx, kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", RestartedAt: "t1", Timeout: "200ms", MaxRestarts: -1})
	if !errtype.Is(err, errtype.NodeNotReady) {
		t.Errorf("maxRestarts -1: %v", err)
	}
}

// After an undo's restart, whose time no output holds: the pod from the
// restart the undo follows does not count, ready as it is; the pod of a
// later restart does.
func TestWaitStaticPodRestartedAfter(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	const forward = "2026-11-26T10:00:00.5Z"
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, mirrorPod(forward, 0, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", RestartedAfter: forward, Timeout: "1s"}
	if _, err := a.WaitStaticPod(ctx, in); err == nil || !strings.Contains(err.Error(), "from before the restart") {
		t.Fatalf("the pod of the restart before counted: %v", err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Update(ctx, mirrorPod("2026-11-26T10:05:00.25Z", 0, true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	in.Timeout = "1m"
	if res, err := a.WaitStaticPod(ctx, in); err != nil || !res.Ready {
		t.Errorf("the pod of a later restart: %+v %v", res, err)
	}
	in.RestartedAfter = "yesterday"
	if _, err := a.WaitStaticPod(ctx, in); err == nil {
		t.Error("restartedAfter yesterday accepted")
	}
}

// An API server that holds a request (restarting, or waiting on an etcd
// that is) does not hold the wait with it: the request is cut at
// RequestTimeout and the wait polls again, heartbeating, and sees the pod
// once the API answers. Without the bound, the wait hangs in its first
// request past its heartbeat timeout.
func TestWaitStaticPodOutlivesAnAPIServerThatHoldsRequests(t *testing.T) {
	ready, _ := json.Marshal(mirrorPod("t1", 0, true))
	var held atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-system/pods/kube-apiserver-tyc1" {
			http.NotFound(w, r)
			return
		}
		if held.Add(1) <= 2 {
			<-r.Context().Done() // held until the client gives up
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(ready)
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "+srv.URL+
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Activities{PollInterval: 10 * time.Millisecond, RequestTimeout: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := a.WaitStaticPod(ctx, kube.WaitStaticPodInput{Cluster: target.Kube{Name: "c", Kubeconfig: kubeconfig}, Node: "tyc1", Pod: "kube-apiserver", RestartedAt: "t1", Timeout: "1m"})
	if err != nil || !res.Ready {
		t.Fatalf("want the pod ready once the API answers, got %+v, %v", res, err)
	}
	if n := held.Load(); n != 3 {
		t.Errorf("%d requests, want the two held ones cut and a third", n)
	}
}

// A renewal on Kedge's layout changes the manifests' certificates
// annotation; the pod from before it (which already serves the renewed
// certificate, reloaded from disk) does not count, the pod rendered for
// the renewal does.
func TestWaitStaticPodCertificates(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	old := mirrorPod("", 0, true)
	old.Annotations = map[string]string{render.CertificatesAnnotation: "1a:2b"}
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", Certificates: "3c:4d", Timeout: "1s"}
	if _, err := a.WaitStaticPod(ctx, in); err == nil || !strings.Contains(err.Error(), `from before the renewal (kedge.dev/certificates "1a:2b")`) {
		t.Fatalf("the pod from before the renewal counted: %v", err)
	}
	renewed := mirrorPod("", 0, true)
	renewed.Annotations = map[string]string{render.CertificatesAnnotation: "3c:4d"}
	if _, err := cs.CoreV1().Pods("kube-system").Update(ctx, renewed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := a.WaitStaticPod(ctx, in); err != nil || !res.Ready {
		t.Errorf("the pod of the renewal: %+v %v", res, err)
	}
}

// An upgrade's wait counts only the pod of the new image: the old API
// server is ready and answers until the kubelet has read the manifest.
func TestWaitStaticPodImage(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	withImage := func(image string) *corev1.Pod {
		p := mirrorPod("", 0, true)
		p.Spec.Containers = []corev1.Container{{Name: "kube-apiserver", Image: image}}
		return p
	}
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, withImage("registry.k8s.io/kube-apiserver:v1.35.4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := kube.WaitStaticPodInput{Node: "tyc1", Pod: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.36.3", Timeout: "1s"}
	if _, err := a.WaitStaticPod(ctx, in); err == nil || !strings.Contains(err.Error(), "runs the pod of image registry.k8s.io/kube-apiserver:v1.35.4") {
		t.Fatalf("the pod of the old image counted: %v", err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Update(ctx, withImage(in.Image), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := a.WaitStaticPod(ctx, in); err != nil || !res.Ready {
		t.Errorf("the pod of the new image: %+v %v", res, err)
	}
}
