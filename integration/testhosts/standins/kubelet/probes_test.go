package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// health is an endpoint per probe whose answers a test sets, counting the
// requests each gets.
type health struct {
	mu    sync.Mutex
	code  map[string]int
	calls map[string]int
}

func (h *health) set(path string, code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.code[path] = code
}

func (h *health) called(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[path]
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.calls[r.URL.Path]++
	code := h.code[r.URL.Path]
	h.mu.Unlock()
	if r.Header.Get("User-Agent") != "kube-probe/1.35" {
		code = http.StatusTeapot
	}
	w.WriteHeader(code)
}

func newHealth(t *testing.T) (*health, int) {
	h := &health{code: map[string]int{}, calls: map[string]int{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return h, p
}

func probed(port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: probed, namespace: kube-system}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: lab.example/sleep:1
    command: [sleep, "300"]
    startupProbe:
      httpGet: {host: 127.0.0.1, port: %[1]d, path: /start}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      httpGet: {host: 127.0.0.1, port: %[1]d, path: /live}
      periodSeconds: 1
      failureThreshold: 2
    readinessProbe:
      httpGet: {host: 127.0.0.1, port: %[1]d, path: /ready}
      periodSeconds: 1
`, port)
}

func mainStatus(m *staticPods) containerStatus {
	st, _ := m.statuses()
	if len(st) != 1 || len(st[0].containers) != 1 {
		return containerStatus{}
	}
	return st[0].containers[0]
}

// Until its startup probe passes a container is not started, and neither
// its liveness nor its readiness probe runs; it is ready only once its
// readiness probe passes; a liveness probe failing failureThreshold times
// in a row has it killed and restarted, not ready again until its probes
// pass.
func TestProbesGateReadinessAndRestartAContainerThatFailsLiveness(t *testing.T) {
	h, port := newHealth(t)
	h.set("/start", http.StatusServiceUnavailable)
	h.set("/live", http.StatusOK)
	h.set("/ready", http.StatusInternalServerError)
	w := newWorld(t)
	w.manifest("probed.yaml", probed(port))
	m := w.kubelet()
	until(t, m, 5*time.Second, "the container runs, its startup probe failing", func() bool {
		c := mainStatus(m)
		return c.running && h.called("/start") >= 2
	})
	if c := mainStatus(m); c.started || c.ready || h.called("/live") > 0 || h.called("/ready") > 0 {
		t.Fatalf("before its startup probe passed: %+v, liveness probed %d, readiness %d times", c, h.called("/live"), h.called("/ready"))
	}

	h.set("/start", http.StatusOK)
	until(t, m, 5*time.Second, "started, readiness probed", func() bool {
		c := mainStatus(m)
		return c.started && h.called("/ready") >= 2
	})
	if c := mainStatus(m); c.ready {
		t.Fatalf("ready with its readiness probe failing: %+v", c)
	}
	h.set("/ready", http.StatusFound) // 200-399 pass
	until(t, m, 5*time.Second, "ready", func() bool { return mainStatus(m).ready })
	first := w.container("kube-system_probed", "main")

	h.set("/ready", http.StatusInternalServerError)
	h.set("/live", http.StatusInternalServerError)
	until(t, m, 15*time.Second, "killed for its liveness probe and started again", func() bool {
		c := w.container("kube-system_probed", "main")
		return c.Restarts == 1 && c.PID != first.PID && running(c)
	})
	if running(first) {
		t.Error("the container that failed its liveness probe still runs")
	}
	if c := mainStatus(m); c.ready || c.last == nil {
		t.Errorf("after the restart, its readiness probe failing: %+v", c)
	}
	h.set("/live", http.StatusOK)
	h.set("/ready", http.StatusOK)
	until(t, m, 5*time.Second, "ready again", func() bool { return mainStatus(m).ready })
}
