package resume_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/resume"
)

type progress struct{ Done int }

// sealed is what a worker with the codec heartbeats for an activity of
// type activityType in this workflow.
func sealed(ctx workflow.Context, dc converter.DataConverter, activityType string, v any) *commonpb.Payloads {
	info := workflow.GetInfo(ctx)
	p, err := converter.WithDataConverterSerializationContext(dc, converter.ActivitySerializationContext{
		Namespace: info.Namespace, WorkflowID: info.WorkflowExecution.ID, ActivityType: activityType,
	}).ToPayloads(v)
	if err != nil {
		panic(err)
	}
	return p
}

// lost is the error the workflow sees when an attempt misses its
// heartbeat: the server's timeout failure with the last details.
func lost(details *commonpb.Payloads) error {
	return temporal.GetDefaultFailureConverter().FailureToError(&failurepb.Failure{
		Message: "activity Heartbeat timeout",
		FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{
			TimeoutType: enumspb.TIMEOUT_TYPE_HEARTBEAT, LastHeartbeatDetails: details,
		}},
	})
}

// With the payload codec, the details travel sealed, open in the next
// attempt of the same action and in no other.
func TestSealedDetailsOpenOnlyInTheSameAction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "codec.key")
	if _, err := codec.Generate(path); err != nil {
		t.Fatal(err)
	}
	cd, err := codec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dc := cd.DataConverter()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetDataConverter(dc)
	rec := &headerRecorder{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&resume.Interceptor{DataConverter: dc}, rec}})
	attempt := func(ctx context.Context) (int, error) {
		var p progress
		resume.Load(ctx, &p)
		return p.Done, nil
	}
	env.RegisterActivityWithOptions(attempt, activity.RegisterOptions{Name: "drain"})
	env.RegisterActivityWithOptions(attempt, activity.RegisterOptions{Name: "other"})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) ([]int, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		next := resume.After(ctx, lost(sealed(ctx, dc, "drain", progress{Done: 7})))
		var got []int
		for _, name := range []string{"drain", "other"} {
			var n int
			if err := workflow.ExecuteActivity(next, name).Get(ctx, &n); err != nil {
				return nil, err
			}
			got = append(got, n)
		}
		return got, nil
	}, workflow.RegisterOptions{Name: "w"})
	env.ExecuteWorkflow("w")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var got []int
	if err := env.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 7 || got[1] != 0 {
		t.Errorf("drain resumed from %v, other from %v; want 7 and 0 (sealed for drain only)", got[0], got[1])
	}
	if len(rec.headers) != 2 {
		t.Fatalf("%d attempts had the header, want 2", len(rec.headers))
	}
	for _, h := range rec.headers {
		var details commonpb.Payloads
		if err := converter.GetDefaultDataConverter().FromPayload(h, &details); err != nil {
			t.Fatal(err)
		}
		for _, p := range details.GetPayloads() {
			if string(p.GetMetadata()["encoding"]) != codec.Encoding || strings.Contains(string(p.GetData()), "Done") {
				t.Errorf("the header holds details that are not sealed: %v", p)
			}
		}
	}
}

// headerRecorder keeps the resume header of every activity task.
type headerRecorder struct {
	interceptor.WorkerInterceptorBase
	headers []*commonpb.Payload
}

func (r *headerRecorder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &recordHeader{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, r: r}
}

type recordHeader struct {
	interceptor.ActivityInboundInterceptorBase
	r *headerRecorder
}

func (a *recordHeader) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if h := interceptor.Header(ctx)[resume.Header]; h != nil {
		a.r.headers = append(a.r.headers, h)
	}
	return a.Next.ExecuteActivity(ctx, in)
}

// Load prefers the attempt's own details (a retry by Temporal) and is
// false outside an activity.
func TestLoadReadsTheAttemptsOwnDetails(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetHeartbeatDetails(progress{Done: 3})
	env.RegisterActivityWithOptions(func(ctx context.Context) (int, error) {
		var p progress
		if !resume.Load(ctx, &p) {
			return -1, nil
		}
		return p.Done, nil
	}, activity.RegisterOptions{Name: "a"})
	v, err := env.ExecuteActivity("a")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := v.Get(&n); err != nil || n != 3 {
		t.Errorf("Load = %d (%v), want 3", n, err)
	}
	var p progress
	if resume.Load(context.Background(), &p) {
		t.Error("Load outside an activity reported details")
	}
}

func TestBeganKeepsOnlyAPastStart(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		started time.Time
		want    time.Time
		ok      bool
	}{
		{now.Add(-time.Minute), now.Add(-time.Minute), true},
		{time.Time{}, now, false},
		{now.Add(time.Minute), now, false}, // a clock ahead of this worker's
	} {
		if got, ok := resume.Began(tc.started, now); !got.Equal(tc.want) || ok != tc.ok {
			t.Errorf("Began(%v) = %v %v, want %v %v", tc.started, got, ok, tc.want, tc.ok)
		}
	}
}
