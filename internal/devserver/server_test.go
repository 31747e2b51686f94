package devserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/internal/searchattr"
)

const testQueue = "devserver-test"

func greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

// greetWorkflow runs the greet activity n times in a row.
func greetWorkflow(ctx workflow.Context, name string, n int) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	for range max(n, 1) {
		if err := workflow.ExecuteActivity(ctx, "greet", name).Get(ctx, &out); err != nil {
			return "", err
		}
	}
	return out, nil
}

func dialTest(t testing.TB, s *Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.FrontendAddress(), Namespace: s.Namespace(), Logger: sdkLog{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startWorker runs a worker for greetWorkflow until the test ends and
// returns its client.
func startWorker(t testing.TB, s *Server) client.Client {
	t.Helper()
	c := dialTest(t, s)
	w := worker.New(c, testQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(greetWorkflow, workflow.RegisterOptions{Name: "greet-workflow"})
	w.RegisterActivityWithOptions(greet, activity.RegisterOptions{Name: "greet"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return c
}

func runGreet(t testing.TB, c client.Client, id string, n int) string {
	t.Helper()
	ctx := context.Background()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: testQueue}, "greet-workflow", "kedge", n)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow %s: %v", id, err)
	}
	return out
}

func TestRunsWorkflowsServesUIAndKeepsState(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Start(ctx, Config{DataDir: dir, FrontendAddr: "127.0.0.1:0", UIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if out := runGreet(t, startWorker(t, s), "persist-me", 2); out != "hello kedge" {
		t.Errorf("workflow result %q", out)
	}
	if !strings.HasPrefix(s.UIURL(), "http://127.0.0.1:") {
		t.Errorf("UIURL() = %q", s.UIURL())
	}
	resp, err := http.Get(s.UIURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s/ answered %d", s.UIURL(), resp.StatusCode)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	s2, err := Start(ctx, Config{DataDir: dir, FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	defer s2.Stop()
	if s2.UIURL() != "" {
		t.Errorf("UIURL() without a UI = %q", s2.UIURL())
	}
	c2 := startWorker(t, s2)
	d, err := c2.DescribeWorkflowExecution(ctx, "persist-me", "")
	if err != nil {
		t.Fatalf("the run did not survive a restart: %v", err)
	}
	if st := d.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("status after restart = %v", st)
	}
	// The restarted server runs workflows too.
	if out := runGreet(t, c2, "after-restart", 1); out != "hello kedge" {
		t.Errorf("workflow result after restart %q", out)
	}
}

func TestEnsureSearchAttributes(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{FrontendAddr: "127.0.0.1:0", Namespace: "kedge-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Namespace() != "kedge-test" {
		t.Errorf("Namespace() = %q", s.Namespace())
	}
	c := dialTest(t, s)
	list := func() map[string]enumspb.IndexedValueType {
		got, err := c.OperatorService().ListSearchAttributes(ctx,
			&operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
		if err != nil {
			t.Fatal(err)
		}
		return got.CustomAttributes
	}
	// Start registered Kedge's own, usable at once: the list filters by
	// them.
	for name, typ := range searchattr.Definitions() {
		if got := list()[name]; got != typ {
			t.Errorf("after Start, %s = %v, want %v", name, got, typ)
		}
	}
	if _, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.Namespace(), Query: "KedgeCluster = 'mercury' AND KedgeStatus = 'running'"}); err != nil {
		t.Errorf("list by Kedge's search attributes: %v", err)
	}
	want := map[string]enumspb.IndexedValueType{
		"KedgeCluster": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		"KedgeSteps":   enumspb.INDEXED_VALUE_TYPE_INT,
	}
	for range 2 { // the second call finds them all present
		if err := s.EnsureSearchAttributes(ctx, want); err != nil {
			t.Fatal(err)
		}
	}
	got := list()
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("%s = %v, want %v", name, got[name], typ)
		}
	}
	err = s.EnsureSearchAttributes(ctx, map[string]enumspb.IndexedValueType{"KedgeSteps": enumspb.INDEXED_VALUE_TYPE_KEYWORD})
	if !errors.Is(err, searchattr.ErrWrongType) {
		t.Errorf("a search attribute of another type: %v", err)
	}
}

// A workflow started with Kedge's search attributes right after Start, and
// upserting one, runs: every service knows them.
func TestSearchAttributesUsableAfterStart(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := dialTest(t, s)
	w := worker.New(c, testQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		return workflow.UpsertTypedSearchAttributes(ctx, searchattr.StatusKey.ValueSet(searchattr.StatusSucceeded))
	}, workflow.RegisterOptions{Name: "upsert"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "upsert", TaskQueue: testQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(searchattr.ClusterKey.ValueSet("mercury"), searchattr.StatusKey.ValueSet(searchattr.StatusRunning)),
	}, "upsert")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := run.Get(wctx, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.Namespace(), Query: "KedgeCluster = 'mercury' AND KedgeStatus = 'succeeded'"})
		return err == nil && len(resp.Executions) == 1
	})
}

func eventually(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in time")
}

// Parallel tests each start a server; their ports must not clash.
func TestTwoServersAtOnce(t *testing.T) {
	ctx := context.Background()
	a, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	b, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if a.FrontendAddress() == b.FrontendAddress() {
		t.Fatalf("both servers on %s", a.FrontendAddress())
	}
	runGreet(t, startWorker(t, a), "on-a", 1)
	runGreet(t, startWorker(t, b), "on-b", 1)
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if s, err := Start(context.Background(), Config{FrontendAddr: l.Addr().String()}); err == nil {
		s.Stop()
		t.Fatal("started on a port in use")
	}
}

// BenchmarkSequentialActivities reports the latency of one activity in a
// workflow of sequential trivial activities, on a file-backed server as
// kedge dev runs it.
func BenchmarkSequentialActivities(b *testing.B) {
	const n = 100
	s, err := Start(context.Background(), Config{DataDir: b.TempDir(), FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	c := startWorker(b, s)
	runGreet(b, c, "warm-up", 1)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		runGreet(b, c, "", n) // "": the SDK picks an ID
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N*n), "ms/activity")
}
