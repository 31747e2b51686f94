package integration

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape GETs a worker's endpoint and returns its status and body.
func scrape(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// sample sums the samples of a metric whose labels include every
// label="value" in match.
func sample(scrape, name string, match ...string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{([^}]*)\})? (\S+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(scrape, -1) {
		ok := true
		for _, l := range match {
			if !strings.Contains(","+m[1]+",", ","+l+",") {
				ok = false
			}
		}
		if v, err := strconv.ParseFloat(m[2], 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}

// A real `kedge worker --metrics-listen` serves /healthz and Prometheus
// metrics; running a rollout moves Kedge's counters and the SDK's.
func TestMetricsWorkerCountsStepsAndNodes(t *testing.T) {
	mainLane.join(t)
	const queue = "metrics"
	m := siteWorker(t, queue, "kedge-metrics", regexp.MustCompile(`metrics on (http://\S+)/metrics`), "--metrics-listen", "127.0.0.1:0")
	base := m[1]
	if code, body := scrape(t, base+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "metered-node.yaml"), []byte(`
apiVersion: kedge/v1
kind: Runbook
metadata: {name: metered-node}
params:
  node: {type: string, required: true}
steps:
  - id: touch
    action: host.run
    on: ${ params.node }
    with: {command: "true"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rb := filepath.Join(dir, "metered.yaml")
	if err := os.WriteFile(rb, []byte(`
apiVersion: kedge/v1
kind: Runbook
metadata: {name: metered}
params:
  nodes: {type: nodes, default: workers}
steps:
  - id: roll
    runbook: metered-node
    rollout: {over: "${ params.nodes }", maxUnavailable: 2}
    with: {node: "${ item }"}
  - id: fail
    needs: [roll]
    action: host.run
    on: controller-1
    retry: {maxAttempts: 1}
    with: {command: "exit 4"}
  - id: never
    needs: [fail]
    action: host.run
    on: controller-1
    with: {command: "true"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, before := scrape(t, base+"/metrics")
	p, code, errOut := runWait(t, rb, "--task-queue", queue)
	if code == 0 {
		t.Fatalf("step fail did not fail the run: %s %+v", errOut, p)
	}
	want := []struct {
		name, runbook string
		delta         float64
	}{
		{"kedge_nodes_rolled_total", "metered-node", 2},
		{"kedge_steps_run_total", "metered-node", 2},
		{"kedge_steps_failed_total", "metered-node", 0},
		{"kedge_steps_run_total", "metered", 2}, // roll and fail; never did not run
		{"kedge_steps_failed_total", "metered", 1},
	}
	var after string
	deadline := time.Now().Add(10 * time.Second) // the SDK reports every second
	for {
		_, after = scrape(t, base+"/metrics")
		moved := true
		for _, w := range want {
			if sample(after, w.name, `runbook="`+w.runbook+`"`)-sample(before, w.name, `runbook="`+w.runbook+`"`) != w.delta {
				moved = false
			}
		}
		if moved || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, w := range want {
		d := sample(after, w.name, `runbook="`+w.runbook+`"`) - sample(before, w.name, `runbook="`+w.runbook+`"`)
		if d != w.delta {
			t.Errorf("%s{runbook=%q} moved by %v, want %v", w.name, w.runbook, d, w.delta)
		}
	}
	if n := sample(after, "kedge_steps_run_total", `runbook="metered"`, `cluster="lab"`, `task_queue="`+queue+`"`); n < 2 {
		t.Errorf("kedge_steps_run_total lacks its cluster and task_queue labels:\n%s", grep(after, "kedge_"))
	}
	// The SDK's own metrics, from the same endpoint.
	for _, name := range []string{"temporal_workflow_completed_total", "temporal_activity_execution_latency_seconds_count", "temporal_worker_start_total"} {
		if sample(after, name, `task_queue="`+queue+`"`) == 0 {
			t.Errorf("no %s in the scrape:\n%s", name, grep(after, "temporal_"))
		}
	}
}

func grep(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
