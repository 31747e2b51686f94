package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/resume"

	"kedge.dev/kedge/actions/host"
)

// TestALostAttemptHandsItsHeartbeatToTheNext runs one host.run step
// whose attempts end as scripted and records what each attempt found to
// resume from, on the path of runs started before Temporal retried
// actions (each attempt an activity of its own, retried by the workflow,
// the lost one's details carried in the next one's header).
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
			env.OnGetVersion(retriesChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
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

// TestTemporalRetriesKeepTheStepsBudget runs one host.run step on the
// path Temporal retries (runs started since retriesChange), with the
// worker's interceptor, and scripts how each attempt ends: a lost
// attempt (its heartbeat missed) never counts against the step's
// maxAttempts and hands its heartbeat details to the next; a failure
// counts, and the attempt after it starts over.
func TestTemporalRetriesKeepTheStepsBudget(t *testing.T) {
	type done struct{ Done int }
	lost := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
	boom := temporal.NewApplicationError("boom", errtype.CommandFailed)
	for _, tc := range []struct {
		name        string
		maxAttempts int
		ends        []error // how attempt i+1 ends; past the end: success
		silent      int     // the attempt that does not heartbeat
		found       []int   // Done as each attempt found it
		failed      bool
		// attempts the step reports (0: not checked: after a last
		// attempt lost, the server's retry state says how many; the test
		// environment does not)
		attempts int
		says     string // in the step's last error
	}{
		{name: "a lost attempt resumes", maxAttempts: 1, ends: []error{lost}, found: []int{0, 10}, attempts: 2, says: "attempt 1 lost"},
		{name: "one lost before its first heartbeat passes on what it found", maxAttempts: 1, ends: []error{lost, lost}, silent: 2, found: []int{0, 10, 10}, attempts: 3, says: "attempt 2 lost"},
		{name: "after a failure it starts over", maxAttempts: 2, ends: []error{lost, boom}, found: []int{0, 10, 0}, attempts: 3, says: "boom"},
		{name: "lost attempts are not failures", maxAttempts: 2, ends: []error{boom, lost, lost, boom}, found: []int{0, 0, 20, 30}, failed: true, attempts: 4, says: "boom"},
		{name: "one failure spends maxAttempts 1", maxAttempts: 1, ends: []error{boom, nil}, found: []int{0}, failed: true, attempts: 1, says: "boom"},
		{name: "losses are bounded", maxAttempts: 3, ends: []error{lost, lost, lost, lost, lost, lost, lost, lost}, found: []int{0, 10, 20, 30, 40, 50, 60, 70}, failed: true, says: "heartbeat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := newEnv(t)
			var mu sync.Mutex
			var found []int
			env.RegisterActivityWithOptions(func(ctx context.Context, in host.RunInput) (host.RunResult, error) {
				var p done
				resume.Load(ctx, &p)
				mu.Lock()
				found = append(found, p.Done)
				n := len(found)
				mu.Unlock()
				if n != tc.silent {
					activity.RecordHeartbeat(ctx, done{Done: n * 10})
				}
				if n <= len(tc.ends) {
					return host.RunResult{}, tc.ends[n-1]
				}
				return host.RunResult{}, nil
			}, activity.RegisterOptions{Name: host.RunAction})
			env.ExecuteWorkflow(Runbook, input(t, fmt.Sprintf(`
apiVersion: kedge/v1
kind: Runbook
metadata: {name: once}
steps:
  - id: once
    action: host.run
    on: worker-1
    retry: {maxAttempts: %d, initialInterval: 1s}
    with: {command: x}
`, tc.maxAttempts), nil))
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			if err := env.GetWorkflowError(); (err != nil) != tc.failed {
				t.Fatalf("run error %v, want failed=%v", err, tc.failed)
			}
			if !slices.Equal(found, tc.found) {
				t.Errorf("the attempts found %v to resume from, want %v", found, tc.found)
			}
			s := stepState(progress(t, env), "once")
			if tc.attempts > 0 && s.Attempts != tc.attempts || !strings.Contains(s.LastError, tc.says) {
				t.Errorf("step: %d attempts, last error %q; want %d, %q", s.Attempts, s.LastError, tc.attempts, tc.says)
			}
		})
	}
}
