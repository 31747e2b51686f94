package devserver

import (
	"context"
	"net/http"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func greet(ctx context.Context, name string) (string, error) { return "hello " + name, nil }

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

func startWorker(t testing.TB, s *Server) client.Client {
	c, err := client.Dial(client.Options{HostPort: s.FrontendAddress(), Namespace: s.Namespace(), Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, "devserver-test", worker.Options{})
	w.RegisterWorkflowWithOptions(greetWorkflow, workflow.RegisterOptions{Name: "greet-workflow"})
	w.RegisterActivityWithOptions(greet, activity.RegisterOptions{Name: "greet"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); c.Close() })
	return c
}

func TestRunsWorkflowsServesUIAndKeepsState(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Start(ctx, Config{DataDir: dir, FrontendAddr: "127.0.0.1:0", UIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	c := startWorker(t, s)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "persist-me", TaskQueue: "devserver-test"}, "greet-workflow", "kedge", 1)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "hello kedge" {
		t.Fatalf("workflow: %q %v", out, err)
	}
	resp, err := http.Get(s.UIURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("UI answered %d", resp.StatusCode)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	s2, err := Start(ctx, Config{DataDir: dir, FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	defer s2.Stop()
	c2, err := client.Dial(client.Options{HostPort: s2.FrontendAddress(), Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	d, err := c2.DescribeWorkflowExecution(ctx, "persist-me", "")
	if err != nil {
		t.Fatalf("the run did not survive a restart: %v", err)
	}
	if st := d.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("status after restart = %v", st)
	}
}

func TestEnsureSearchAttributes(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	want := map[string]enumspb.IndexedValueType{"KedgeCluster": enumspb.INDEXED_VALUE_TYPE_KEYWORD, "KedgeRunbook": enumspb.INDEXED_VALUE_TYPE_KEYWORD}
	for range 2 { // the second call finds them present
		if err := s.EnsureSearchAttributes(ctx, want); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.Dial(client.Options{HostPort: s.FrontendAddress(), Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range want {
		if got.CustomAttributes[name] != typ {
			t.Errorf("%s = %v, want %v", name, got.CustomAttributes[name], typ)
		}
	}
}

// BenchmarkSequentialActivities reports the latency of one activity in a
// workflow of sequential activities on the tuned embedded server.
func BenchmarkSequentialActivities(b *testing.B) {
	const n = 100
	ctx := context.Background()
	s, err := Start(ctx, Config{DataDir: b.TempDir(), FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	c := startWorker(b, s)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "devserver-test"}, "greet-workflow", "bench", n)
		if err != nil {
			b.Fatal(err)
		}
		if err := run.Get(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*n), "ms/activity")
}
