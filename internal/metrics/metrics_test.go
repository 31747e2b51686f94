package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A real listener: /healthz follows the health check, /metrics carries
// what went through the SDK handler, with readable label values.
func TestServeHealthAndMetrics(t *testing.T) {
	reg := New(nil, 10*time.Millisecond)
	defer reg.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- reg.Serve(ctx, ln, func(context.Context) error {
			if down.Load() {
				return errors.New("temporal frontend unreachable")
			}
			return nil
		})
	}()
	base := "http://" + ln.Addr().String()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthy: %d %q", code, body)
	}
	down.Store(true)
	if code, body := get(t, base+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "temporal frontend unreachable") {
		t.Errorf("unhealthy: %d %q", code, body)
	}

	reg.Handler().WithTags(map[string]string{"runbook": "kubelet-image-swap", "cluster": "mercury"}).Counter(StepsRun).Inc(3)
	want := `kedge_steps_run_total{cluster="mercury",runbook="kubelet-image-swap"} 3`
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := get(t, base+"/metrics")
		if strings.Contains(body, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in:\n%s", want, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := get(t, base+"/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
