package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"kedge.dev/kedge/workflows"
)

// sharedScope is what a world shared by several tests is built with: a
// testing.TB whose cleanups run when the world is closed (by its last
// test, or at the package's end), whose temp dirs outlive the test that
// built it, and whose logs, once that test is over, go to stderr. Its
// failures fail the test that builds the world.
type sharedScope struct {
	*testing.T
	name string

	mu       sync.Mutex
	ended    bool       // the building test is over
	closer   testing.TB // the test closing the world, while it does
	cleanups []func()
	closed   bool
}

// newSharedScope is a scope built by t, closed at the package's end if
// no test closes it before.
func newSharedScope(t *testing.T, name string) *sharedScope {
	s := &sharedScope{T: t, name: name}
	t.Cleanup(func() {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
	})
	atWorldEnd(func() { s.close(nil) })
	return s
}

// Cleanup runs f when the scope closes, last registered first.
func (s *sharedScope) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// TempDir is a directory under the world's, kept until the package ends.
func (s *sharedScope) TempDir() string {
	dir, err := os.MkdirTemp(world.dir, s.name+"-")
	if err != nil {
		s.T.Fatal(err)
	}
	return dir
}

// reporter is the test that hears what the world says now: the building
// test while it runs, then the one closing it; nil when neither (at the
// package's end): testing panics on a log of a finished test.
func (s *sharedScope) reporter() testing.TB {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.ended:
		return s.T
	case s.closer != nil:
		return s.closer
	}
	return nil
}

func (s *sharedScope) Logf(format string, args ...any) {
	r := s.reporter()
	if r == nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", s.name, fmt.Sprintf(format, args...))
		return
	}
	r.Helper()
	r.Logf(format, args...)
}

func (s *sharedScope) Log(args ...any) { s.Logf("%s", fmt.Sprint(args...)) }

// Errorf fails the building test while it runs, then the test closing
// the world (a teardown that leaves something behind fails it); at the
// package's end it fails the package (world.teardownFailed).
func (s *sharedScope) Errorf(format string, args ...any) {
	r := s.reporter()
	if r == nil {
		fmt.Fprintf(os.Stderr, "%s: error: %s\n", s.name, fmt.Sprintf(format, args...))
		world.teardownFailed.Store(true)
		return
	}
	r.Helper()
	r.Errorf(format, args...)
}

func (s *sharedScope) Error(args ...any) { s.Errorf("%s", fmt.Sprint(args...)) }

// close runs the cleanups, once; what they report goes to t (nil at the
// package's end).
func (s *sharedScope) close(t testing.TB) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.closer = true, t
	fs := s.cleanups
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	s.mu.Lock()
	s.closer = nil
	s.mu.Unlock()
}

// runStepTimes says where a node runbook's time went: every run under
// id (a node's runs share its lock's ID), oldest first, with its steps
// that took over a second. For the log of a slow test; an error is told,
// never fatal.
func runStepTimes(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var runs []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := world.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s'", id), NextPageToken: token})
		if err != nil {
			return fmt.Sprintf("runs of %s: %v", id, err)
		}
		runs = append(runs, resp.Executions...)
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	slices.SortFunc(runs, func(a, b *workflowpb.WorkflowExecutionInfo) int {
		return a.GetStartTime().AsTime().Compare(b.GetStartTime().AsTime())
	})
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "\n%s %s:", r.GetType().GetName(), r.GetStartTime().AsTime().Format(time.TimeOnly))
		v, err := world.client.QueryWorkflow(ctx, id, r.GetExecution().GetRunId(), workflows.ProgressQuery)
		var p workflows.Progress
		if err == nil {
			err = v.Get(&p)
		}
		if err != nil {
			fmt.Fprintf(&b, " %v", err)
			continue
		}
		fmt.Fprintf(&b, " %s", slowSteps(p))
	}
	return b.String()
}

// slowSteps is "ID DURATION" of each of a run's steps that took over a
// second, comma-separated: where its time went.
func slowSteps(p workflows.Progress) string {
	var times []string
	for _, s := range p.Steps {
		if s.StartedAt != nil && s.EndedAt != nil && s.EndedAt.Sub(*s.StartedAt) > time.Second {
			times = append(times, fmt.Sprintf("%s %s", s.ID, s.EndedAt.Sub(*s.StartedAt).Round(time.Second)))
		}
	}
	return strings.Join(times, ", ")
}

// errorRecorder is a test that keeps what it is told to fail with.
type errorRecorder struct {
	*testing.T
	errs []string
}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A shared world outlives the test that builds it: its cleanups run when
// its last test closes it, last registered first, and a teardown that
// leaves something behind fails that test, not a finished one.
func TestSharedScopeClosesOnItsLastTestAndFailsIt(t *testing.T) {
	mainLane.join(t)
	var s *sharedScope
	var order []string
	t.Run("builds", func(t *testing.T) {
		s = newSharedScope(t, "scope-test")
		dir := s.TempDir()
		s.Cleanup(func() { order = append(order, "first") })
		s.Cleanup(func() {
			if _, err := os.Stat(dir); err != nil {
				s.Errorf("the temp dir went with the building test: %v", err)
			}
			order = append(order, "second")
			s.Errorf("left behind: %s", "a process")
		})
	})
	if len(order) != 0 {
		t.Fatalf("the cleanups ran when the building test ended: %v", order)
	}
	last := &errorRecorder{T: t}
	s.close(last)
	s.close(last) // once
	if strings.Join(order, ",") != "second,first" {
		t.Errorf("cleanups ran %v, want the last registered first, once", order)
	}
	if len(last.errs) != 1 || last.errs[0] != "left behind: a process" {
		t.Errorf("the closing test was told %q, want the teardown's one failure", last.errs)
	}
}
