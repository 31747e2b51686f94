package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"kedge.dev/kedge/internal/resume"

	"kedge.dev/kedge/actions/host"
)

// TestALostAttemptHandsItsHeartbeatToTheNext runs one host.run step
// whose attempts end as scripted and records what each attempt found to
// resume from.
func TestALostAttemptHandsItsHeartbeatToTheNext(t *testing.T) {
	type progress struct{ Done int }
	lost := func(details ...any) error {
		return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil, details...)
	}
	for _, tc := range []struct {
		name string
		// ends says how each attempt ends after heartbeating Done =
		// its number times 10 (nil: it succeeds).
		ends func(attempt int, p progress) error
		want []int // Done as each attempt found it (0: nothing)
	}{
		{name: "lost after a heartbeat", ends: func(attempt int, p progress) error {
			if attempt == 1 {
				return lost(p)
			}
			return nil
		}, want: []int{0, 10}},
		{name: "the next one lost before its first heartbeat passes it on", ends: func(attempt int, p progress) error {
			switch attempt {
			case 1:
				return lost(p)
			case 2:
				return lost()
			}
			return nil
		}, want: []int{0, 10, 10}},
		{name: "each lost attempt passes on its own", ends: func(attempt int, p progress) error {
			if attempt < 3 {
				return lost(p)
			}
			return nil
		}, want: []int{0, 10, 20}},
		{name: "an attempt after a failure starts over", ends: func(attempt int, p progress) error {
			switch attempt {
			case 1:
				return lost(p)
			case 2:
				return temporal.NewApplicationError("boom", "Boom")
			}
			return nil
		}, want: []int{0, 10, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&resume.Interceptor{}}})
			Register(env)
			registerAdmit(env)
			var mu sync.Mutex
			var found []int
			env.RegisterActivityWithOptions(func(ctx context.Context, in host.RunInput) (host.RunResult, error) {
				var p progress
				resume.Load(ctx, &p)
				mu.Lock()
				found = append(found, p.Done)
				attempt := len(found)
				mu.Unlock()
				p.Done = attempt * 10
				activity.RecordHeartbeat(ctx, p)
				return host.RunResult{}, tc.ends(attempt, p)
			}, activity.RegisterOptions{Name: host.RunAction})
			env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: once}
steps:
  - id: once
    action: host.run
    on: worker-1
    retry: {maxAttempts: 2, initialInterval: 1s}
    with: {command: x}
`, nil))
			if _, err := result(t, env); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(found, tc.want) {
				t.Errorf("the attempts found %v to resume from, want %v", found, tc.want)
			}
		})
	}
}

// Without the interceptor nothing is carried, and nothing breaks.
func TestWithoutTheInterceptorEveryAttemptStartsOver(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env)
	registerAdmit(env)
	n := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in host.RunInput) (host.RunResult, error) {
		n++
		var p struct{ Done int }
		if resume.Load(ctx, &p) {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("resumed", "Unexpected", errors.New("resumed"))
		}
		if n == 1 {
			return host.RunResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil, struct{ Done int }{10})
		}
		return host.RunResult{}, nil
	}, activity.RegisterOptions{Name: host.RunAction})
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: once}
steps:
  - {id: once, action: host.run, on: worker-1, with: {command: x}}
`, nil))
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}
