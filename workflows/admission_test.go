package workflows

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/runbooks/inventory"

	"kedge.dev/kedge/actions/host"
)

func refusedWith(t *testing.T, env *testsuite.TestWorkflowEnvironment, want string) {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrNotAdmitted || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %s naming %q, got %v", ErrNotAdmitted, want, err)
	}
}

// A start whose input is missing or empty fails before any step: no fake
// successful runs in the list.
func TestAnEmptyStartIsRefused(t *testing.T) {
	for name, start := range map[string]func(env *testsuite.TestWorkflowEnvironment){
		"runbook, nil input":      func(env *testsuite.TestWorkflowEnvironment) { env.ExecuteWorkflow(Runbook, nil) },
		"runbook, empty input":    func(env *testsuite.TestWorkflowEnvironment) { env.ExecuteWorkflow(Runbook, RunbookInput{}) },
		"rollout, nil input":      func(env *testsuite.TestWorkflowEnvironment) { env.ExecuteWorkflow(Rollout, nil) },
		"compensation, nil input": func(env *testsuite.TestWorkflowEnvironment) { env.ExecuteWorkflow(Compensate, nil) },
		"compensation, no parent": func(env *testsuite.TestWorkflowEnvironment) {
			env.ExecuteWorkflow(Compensate, []UndoCall{{Step: "x", Action: host.RunAction}})
		},
		"rollout, no parent": func(env *testsuite.TestWorkflowEnvironment) {
			env.ExecuteWorkflow(Rollout, RolloutInput{Runbook: input(t, perNode, map[string]any{"node": "x"}).Runbook})
		},
	} {
		t.Run(name, func(t *testing.T) {
			env, f := newEnv(t)
			start(env)
			refusedWith(t, env, "run refused")
			if len(f.calls) != 0 {
				t.Errorf("host actions ran: %v", f.calls)
			}
		})
	}
}

// Inputs copied from elsewhere are refused before the first step: a
// child's input started on its own, an input sealed long ago, a run the
// worker finds is not the only one of its ID.
func TestAReplayedStartIsRefusedBeforeAnyStep(t *testing.T) {
	cases := map[string]struct {
		in   func(RunbookInput) RunbookInput
		want string
		busy bool
	}{
		"a child's input started on its own": {in: func(in RunbookInput) RunbookInput {
			in.Admission = Admission{Parent: &Execution{WorkflowID: "swap/lab/1", RunID: "r1"}}
			return in
		}, want: "sealed for a child of swap/lab/1"},
		"no admission": {in: func(in RunbookInput) RunbookInput {
			in.Admission = Admission{}
			return in
		}, want: "carries no admission"},
		"sealed a day before its start": {in: func(in RunbookInput) RunbookInput {
			return Admit(in, time.Now().Add(-24*time.Hour))
		}, want: "an old input replayed"},
		"another run of the ID exists": {in: func(in RunbookInput) RunbookInput { return in }, busy: true,
			want: "another run of default-test-workflow-id exists"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			Register(env)
			f := &fakeHosts{}
			f.register(env)
			env.RegisterActivityWithOptions(func(_ context.Context, in AdmitRunInput) (AdmitRunResult, error) {
				if c.busy {
					return AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID, Reason: "another run of " + in.WorkflowID + " exists (run r0)"}, nil
				}
				return AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID, Admitted: true}, nil
			}, activity.RegisterOptions{Name: AdmitRunActivity})
			env.ExecuteWorkflow(Runbook, c.in(input(t, approvalRunbook, nil)))
			refusedWith(t, env, c.want)
			if len(f.calls) != 0 {
				t.Errorf("host actions ran: %v", f.calls)
			}
		})
	}
}

// The worker's admission check is told the run's runbook and cluster and
// whether a schedule started it, from the sealed input, and its refusal
// is the run's error.
func TestAdmissionNamesTheRunbookClusterAndSchedule(t *testing.T) {
	for name, scheduled := range map[string]bool{"from a front door": false, "from a schedule": true} {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			Register(env)
			f := &fakeHosts{}
			f.register(env)
			var asked AdmitRunInput
			env.RegisterActivityWithOptions(func(_ context.Context, in AdmitRunInput) (AdmitRunResult, error) {
				asked = in
				return AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID, Reason: in.Runbook + " already runs on " + in.Cluster + ": x"}, nil
			}, activity.RegisterOptions{Name: AdmitRunActivity})
			in := input(t, approvalRunbook, nil)
			if scheduled {
				in = AdmitScheduled(in, time.Now(), "nightly")
			}
			env.ExecuteWorkflow(Runbook, in)
			refusedWith(t, env, in.Runbook.Name+" already runs on "+in.Cluster.Name+": x")
			want := AdmitRunInput{WorkflowID: asked.WorkflowID, RunID: asked.RunID, Runbook: in.Runbook.Name, Cluster: in.Cluster.Name,
				Scheduled: scheduled, ScheduleID: in.Admission.Schedule, IssuedAt: in.Admission.IssuedAt}
			if !reflect.DeepEqual(asked, want) || asked.Runbook == "" || asked.Cluster == "" || asked.IssuedAt.IsZero() || scheduled && asked.ScheduleID != "nightly" {
				t.Errorf("asked %+v, want %+v", asked, want)
			}
			if len(f.calls) != 0 {
				t.Errorf("host actions ran: %v", f.calls)
			}
		})
	}
}

// An admission answer made for another run does not admit this one.
func TestAnAdmissionAnswerForAnotherRunIsRefused(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env)
	f := &fakeHosts{}
	f.register(env)
	env.RegisterActivityWithOptions(func(_ context.Context, in AdmitRunInput) (AdmitRunResult, error) {
		return AdmitRunResult{WorkflowID: "other", RunID: in.RunID, Admitted: true}, nil
	}, activity.RegisterOptions{Name: AdmitRunActivity})
	env.ExecuteWorkflow(Runbook, input(t, approvalRunbook, nil))
	refusedWith(t, env, "for another run")
}

// A sealed approval copied from another run, or made for an earlier
// pause, is refused by the update's validator; the pause's own is taken.
func TestADecisionAnswersOnlyItsPause(t *testing.T) {
	env, f := newEnv(t)
	var copied, good updateResult
	env.RegisterDelayedCallback(func() {
		d := bind(t, env, Decision{Step: "gate", Decision: DecisionApprove, By: "mallory"})
		d.RunID = "another-run"
		env.UpdateWorkflow(ApproveUpdate, "1", &copied, d)
		env.UpdateWorkflow(ApproveUpdate, "2", &good, bind(t, env, Decision{Step: "gate", Decision: DecisionApprove, By: "alice"}))
	}, time.Hour)
	env.ExecuteWorkflow(Runbook, input(t, approvalRunbook, nil))
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	if copied.err == nil || !strings.Contains(copied.err.Error(), "not run") {
		t.Errorf("a decision for another run: %v", copied.err)
	}
	if good.err != nil {
		t.Errorf("the pause's own decision: %v", good.err)
	}
	if len(f.calls) != 1 {
		t.Errorf("calls = %v", f.calls)
	}
}

func TestARolloutDecisionOfAnEarlierPauseIsRefused(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if in.Command == "work controller-1" || in.Command == "work worker-1" {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken", "CommandFailed", nil)
		}
		return host.RunResult{}, nil
	}
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1", "worker-1", "worker-2"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{}, MaxUnavailable: 1}
	var first Decision
	var cont, replayed, abort updateResult
	env.RegisterDelayedCallback(func() {
		first = bind(t, env, Decision{Decision: DecisionContinue, By: "bob"})
		env.UpdateWorkflow(DecideUpdate, "1", &cont, first)
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(DecideUpdate, "2", &replayed, first) // the first pause's, sent again
		env.UpdateWorkflow(DecideUpdate, "3", &abort, bind(t, env, Decision{Decision: DecisionAbort, By: "bob"}))
	}, 2*time.Hour)
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	if cont.err != nil {
		t.Fatalf("first decision: %v", cont.err)
	}
	if replayed.err == nil || !strings.Contains(replayed.err.Error(), "another pause") {
		t.Errorf("the first pause's decision at the second: %v", replayed.err)
	}
	if abort.err != nil {
		t.Errorf("the second pause's decision: %v", abort.err)
	}
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || !strings.Contains(err.Error(), "abort") {
		t.Errorf("want the rollout aborted, got %v", err)
	}
}

// A copy of inspect's or chat-follow's input started again (later, or
// under its own ID once more) reads no host and posts nothing: refused
// before its first activity, as a runbook's copied start is.
func TestACopiedInspectOrChatFollowStartsNothing(t *testing.T) {
	type start struct {
		name     string
		workflow string
		input    func(issued time.Time) any
	}
	for _, w := range []start{
		{"inspect", InspectWorkflow, func(issued time.Time) any {
			return InspectInput{Cluster: inventory.Cluster{Name: "mercury"}, Nodes: []string{"eve"}, Admission: Admission{IssuedAt: issued}}
		}},
		{"chat-follow", ChatFollowWorkflow, func(issued time.Time) any {
			return ChatFollowInput{WorkflowID: "hello/lab/1", RunID: "r1", ResponseURL: "https://hooks.example/x", StartedAt: issued}
		}},
	} {
		for name, c := range map[string]struct {
			issued time.Time
			other  bool // another run of its ID exists
			want   string
		}{
			"sealed an hour before": {issued: time.Now().Add(-time.Hour), want: "from its start: an old input replayed"},
			"with no admission":     {want: "its input carries no admission"},
			"under its ID again":    {issued: time.Now(), other: true, want: "another run exists"},
		} {
			t.Run(w.name+"/"+name, func(t *testing.T) {
				var s testsuite.WorkflowTestSuite
				env := s.NewTestWorkflowEnvironment()
				Register(env)
				var acted []string
				env.RegisterActivityWithOptions(func(_ context.Context, in AdmitRunInput) (AdmitRunResult, error) {
					res := AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID, Admitted: !c.other}
					if c.other {
						res.Reason = "another run exists"
					}
					return res, nil
				}, activity.RegisterOptions{Name: AdmitRunActivity})
				for _, name := range []string{ChatFollowActivity, host.LayoutAction} {
					env.RegisterActivityWithOptions(func(ctx context.Context) error {
						acted = append(acted, activity.GetInfo(ctx).ActivityType.Name)
						return nil
					}, activity.RegisterOptions{Name: name})
				}
				env.ExecuteWorkflow(w.workflow, w.input(c.issued))
				refusedWith(t, env, c.want)
				if len(acted) != 0 {
					t.Errorf("it acted: %v", acted)
				}
			})
		}
	}
}
