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
	ended    bool // the building test is over
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
	world.cleanups = append(world.cleanups, s.close)
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

// over says whether the building test has ended: testing panics on a
// log of a finished test.
func (s *sharedScope) over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

func (s *sharedScope) Logf(format string, args ...any) {
	if s.over() {
		fmt.Fprintf(os.Stderr, "%s: %s\n", s.name, fmt.Sprintf(format, args...))
		return
	}
	s.T.Helper()
	s.T.Logf(format, args...)
}

func (s *sharedScope) Log(args ...any) { s.Logf("%s", fmt.Sprint(args...)) }

func (s *sharedScope) Errorf(format string, args ...any) {
	if s.over() {
		fmt.Fprintf(os.Stderr, "%s: error: %s\n", s.name, fmt.Sprintf(format, args...))
		return
	}
	s.T.Helper()
	s.T.Errorf(format, args...)
}

func (s *sharedScope) Error(args ...any) { s.Errorf("%s", fmt.Sprint(args...)) }

// close runs the cleanups, once.
func (s *sharedScope) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	fs := s.cleanups
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
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
		for _, s := range p.Steps {
			if s.StartedAt != nil && s.EndedAt != nil && s.EndedAt.Sub(*s.StartedAt) > time.Second {
				fmt.Fprintf(&b, " %s %s", s.ID, s.EndedAt.Sub(*s.StartedAt).Round(time.Second))
			}
		}
	}
	return b.String()
}
