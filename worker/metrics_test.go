package worker

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"kedge.dev/kedge/internal/metrics"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"
	"kedge.dev/kedge/workflows"

	"kedge.dev/kedge/actions/host"
)

const metricsInventory = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {identityFile: /k/id, knownHostsFile: /k/known_hosts}
controllers:
  - {name: cp-1, address: 127.0.10.1}
workers:
  - {name: w-1, address: 127.0.10.2}
  - {name: w-2, address: 127.0.10.3}
  - {name: w-3, address: 127.0.10.4}
`

// A rollout over three workers where w-2's node runbook fails, within the
// failure budget: two nodes rolled; both of the parent's steps ran; of the
// node runbooks' steps 2+2+1 ran (w-2's second step never ran) and one
// failed.
const metricsRunbook = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: roll}
params:
  nodes: {type: nodes, default: workers}
steps:
  - id: nodes
    runbook: roll-node
    rollout: {over: "${ params.nodes }", maxUnavailable: 1, failureBudget: 5}
    with: {node: "${ item }"}
  - id: after
    needs: [nodes]
    action: host.run
    on: cp-1
    with: {command: after}
`

const metricsNodeRunbook = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: roll-node}
params:
  node: {type: string, required: true}
steps:
  - id: one
    action: host.run
    on: ${ params.node }
    with: {command: "one"}
  - id: two
    needs: [one]
    action: host.run
    on: ${ params.node }
    with: {command: "two"}
`

// The worker's interceptors move Kedge's counters, seen through a real
// scrape of the metrics endpoint.
func TestKedgeCountersAfterARollout(t *testing.T) {
	reg := metrics.New(nil, 0)
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(reg.Handler())
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{&kedgeMetrics{}}})
	workflows.Register(env)
	env.RegisterActivityWithOptions(func(ctx context.Context, in host.RunInput) (host.RunResult, error) {
		if in.Target.Node == "w-2" && in.Command == "one" {
			return host.RunResult{ExitCode: 1}, temporal.NewNonRetryableApplicationError("exit status 1", "CommandFailed", nil)
		}
		return host.RunResult{}, nil
	}, activity.RegisterOptions{Name: host.RunAction})
	env.RegisterActivityWithOptions(func(_ context.Context, in workflows.AdmitRunInput) (workflows.AdmitRunResult, error) {
		return workflows.AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID, Admitted: true}, nil
	}, activity.RegisterOptions{Name: workflows.AdmitRunActivity})
	env.ExecuteWorkflow(workflows.Runbook, workflows.Admit(compile(t), time.Now()))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("runbook failed: %v", err)
	}
	if err := reg.Close(); err != nil { // flush
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Mux(nil))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, c := range []struct {
		name, runbook string
		want          int
	}{
		{"kedge_nodes_rolled_total", "roll-node", 2},
		{"kedge_steps_run_total", "roll", 2},
		{"kedge_steps_failed_total", "roll", 0},
		{"kedge_steps_run_total", "roll-node", 5},
		{"kedge_steps_failed_total", "roll-node", 1},
	} {
		if got := counter(t, string(body), c.name, c.runbook); got != c.want {
			t.Errorf("%s{runbook=%q} = %d, want %d", c.name, c.runbook, got, c.want)
		}
	}
}

// counter sums a counter's samples for one runbook label.
func counter(t *testing.T, scrape, name, runbook string) int {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + name + `\{([^}]*)\} (\S+)$`)
	lbl := regexp.MustCompile(`(^|,)runbook="` + regexp.QuoteMeta(runbook) + `"`)
	sum := 0
	for _, m := range re.FindAllStringSubmatch(scrape, -1) {
		if lbl.MatchString(m[1]) {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += int(v)
		}
	}
	return sum
}

func compile(t *testing.T) workflows.RunbookInput {
	t.Helper()
	docs, err := source.Parse("inventory.yaml", []byte(metricsInventory))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := inventory.Decode(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"roll": metricsRunbook, "roll-node": metricsNodeRunbook} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := (&runbooks.Library{}).LoadFile(filepath.Join(dir, "roll.yaml"), cluster)
	if err != nil {
		t.Fatal(err)
	}
	params, err := runbooks.ResolveParams(l.Runbook, nil, cluster)
	if err != nil {
		t.Fatal(err)
	}
	in := workflows.RunbookInput{Runbook: *l.Runbook, Params: params, Cluster: *cluster, Children: map[string]runbooks.Runbook{}}
	for name, c := range l.Children {
		in.Children[name] = *c
	}
	return in
}
