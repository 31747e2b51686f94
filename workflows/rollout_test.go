package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/prometheus"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks/plan"
)

const perNode = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: per-node}
params:
  node: {type: string, required: true}
steps:
  - id: write
    action: host.write-file
    on: ${ params.node }
    with: {path: /etc/x, content: "${ params.node }"}
    undo:
      - action: host.restore-file
        with: {path: /etc/x, backup: "${ steps.write.outputs.backup }"}
      - action: host.run
        with: {command: "restart-after-undo"}
  - id: work
    needs: [write]
    action: host.run
    on: ${ params.node }
    with: {command: "work $NODE", env: {NODE: "${ params.node }"}}
`

const swapAll = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: swap-all}
params:
  nodes: {type: nodes, default: all}
  maxUnavailable: {type: int, default: 2}
  failureBudget: {type: int, default: 0}
steps:
  - id: swap
    runbook: per-node
    rollout: {over: "${ params.nodes }", maxUnavailable: "${ params.maxUnavailable }", failureBudget: "${ params.failureBudget }"}
    with: {node: "${ item }"}
`

// windowTracker records how many items run at once and in which order they
// start and end.
type windowTracker struct {
	mu      sync.Mutex
	running int
	maxSeen int
	events  []string
}

func (w *windowTracker) enter(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running++
	w.maxSeen = max(w.maxSeen, w.running)
	w.events = append(w.events, "start "+node)
}

func (w *windowTracker) leave(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running--
	w.events = append(w.events, "end "+node)
}

func TestRolloutSlidingWindow(t *testing.T) {
	env, f := newEnv(t)
	w := &windowTracker{}
	durations := map[string]time.Duration{"controller-1": 300 * time.Millisecond, "worker-1": 20 * time.Millisecond, "worker-2": 20 * time.Millisecond}
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if strings.HasPrefix(in.Command, "work") {
			w.enter(in.Target.Node)
			time.Sleep(durations[in.Target.Node])
			w.leave(in.Target.Node)
		}
		return host.RunResult{}, nil
	}
	var childIDs []string
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		childIDs = append(childIDs, info.WorkflowExecution.ID)
	})
	env.ExecuteWorkflow(Runbook, input(t, swapAll, map[string]any{"maxUnavailable": "2"}, perNode))
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("rollout failed: %v", err)
	}
	if w.maxSeen != 2 {
		t.Errorf("at most %d nodes ran at once, want 2 (events %v)", w.maxSeen, w.events)
	}
	// worker-2 starts as soon as worker-1 ends, while controller-1 still
	// runs: a sliding window, not fixed batches.
	i2 := slices.Index(w.events, "start worker-2")
	iC := slices.Index(w.events, "end controller-1")
	if i2 < 0 || iC < 0 || i2 > iC {
		t.Errorf("not a sliding window: %v", w.events)
	}
	if !slices.Contains(childIDs, "mercury/node/worker-2") {
		t.Errorf("child IDs do not lock the node: %v", childIDs)
	}
	if s := stepState(res.Progress, "swap"); s.State != StateSucceeded || s.Child == "" {
		t.Errorf("swap = %+v", s)
	}
}

func TestRolloutPausesAtBudgetThenAbortUndoesCompleted(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if in.Command == "work worker-1" {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken worker-1", "CommandFailed", nil)
		}
		return host.RunResult{}, nil
	}
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1", "worker-1", "worker-2"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1, FailureBudget: 0}
	var early, abort updateResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(DecideUpdate, "1", &early, bind(t, env, Decision{Decision: "maybe", By: "alice"}))
		env.UpdateWorkflow(DecideUpdate, "2", &abort, bind(t, env, Decision{Decision: DecisionAbort, By: "alice"}))
	}, time.Hour)
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	if !env.IsWorkflowCompleted() {
		t.Fatal("rollout did not complete")
	}
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "aborted by alice") {
		t.Fatalf("want an abort, got %v", err)
	}
	if early.err == nil || abort.err != nil {
		t.Errorf("bad decision accepted (%v) or abort refused (%v)", early.err, abort.err)
	}
	calls := f.Calls()
	if slices.Contains(calls, "run work worker-2@worker-2") {
		t.Errorf("a node started after the budget was spent: %v", calls)
	}
	// controller-1 completed: its undo ran, in the order written.
	iRestore := slices.Index(calls, "restore /etc/x from /var/lib/kedge/backup/x@controller-1")
	iRestart := slices.Index(calls, "run restart-after-undo@controller-1")
	if iRestore < 0 || iRestart < iRestore {
		t.Errorf("completed node not undone in order: %v", calls)
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != "RolloutAborted" || !strings.Contains(err.Error(), "undone: controller-1") || strings.Contains(err.Error(), "UNDO FAILED") {
		t.Errorf("the abort does not say what was undone: %v", err)
	}
}

// An undo that fails is reported as such, never as undone: the error
// names the item and why, and its type says the rollout left work behind.
func TestRolloutAbortReportsAFailedUndo(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		switch in.Command {
		case "work worker-1":
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken worker-1", "CommandFailed", nil)
		case "restart-after-undo":
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("unit would not start", "UnitFailed", nil)
		}
		return host.RunResult{}, nil
	}
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1", "worker-1", "worker-2"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1, FailureBudget: 0}
	var abort updateResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(DecideUpdate, "1", &abort, bind(t, env, Decision{Decision: DecisionAbort, By: "alice"}))
	}, time.Hour)
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != "RolloutUndoFailed" {
		t.Fatalf("want RolloutUndoFailed, got %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "UNDO FAILED on 1: controller-1: undo:") || !strings.Contains(msg, "unit would not start") || strings.Contains(msg, "undone:") {
		t.Errorf("the abort hides the failed undo: %s", msg)
	}
	var res RolloutResult
	if !app.HasDetails() || app.Details(&res) != nil || len(res.UndoFailed) != 1 || len(res.Undone) != 0 {
		t.Errorf("result: %+v", res)
	}
}

func TestRolloutContinueAfterPause(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if in.Command == "work controller-1" {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken", "CommandFailed", nil)
		}
		return host.RunResult{}, nil
	}
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1", "worker-1", "worker-2"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{}, MaxUnavailable: 1}
	var u updateResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(DecideUpdate, "1", &u, bind(t, env, Decision{Decision: DecisionContinue, By: "bob"}))
	}, time.Hour)
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	if err := env.GetWorkflowError(); err != nil || u.err != nil {
		t.Fatalf("rollout: %v (decision %v)", err, u.err)
	}
	var res RolloutResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Done, []string{"worker-1", "worker-2"}) || !slices.Equal(res.Failed, []string{"controller-1"}) {
		t.Errorf("result = %+v", res)
	}
}

// A rollout over many items continues as new before its history grows
// large, carrying what it has done.
func TestRolloutContinuesAsNew(t *testing.T) {
	env, _ := newEnv(t)
	in := input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: noop}
params:
  node: {type: string, required: true}
steps:
  - id: nothing
    when: "false"
    action: host.run
    on: ${ params.node }
    with: {command: x}
`, map[string]any{"node": "x"})
	items := make([]string, 30)
	for i := range items {
		items[i] = fmt.Sprintf("n%d", i)
	}
	asChild(env)
	env.ExecuteWorkflow(Rollout, RolloutInput{Step: "big", Runbook: in.Runbook, Cluster: in.Cluster, Items: items,
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{}, MaxUnavailable: 4, ItemsPerRun: 10})
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errorsAs(err, &can) {
		t.Fatalf("want continue-as-new after 10 items, got %v", err)
	}
	var next RolloutInput
	if err := decodeInput(can, &next); err != nil {
		t.Fatal(err)
	}
	if next.State.Next != 10 || len(next.State.Done) != 10 || next.State.Runs != 1 {
		t.Errorf("carried state: next %d, done %d", next.State.Next, len(next.State.Done))
	}
}

// A runbook that fails after a rollout step undoes the rollout's
// completed items too, newest first, each item's undo in the order
// written, shown on the rollout's step (a CA rotation rejected at its
// last gate walks back every stage).
func TestAFailedRunbookUndoesItsCompletedRollout(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if in.Command == "then fail" {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken", "CommandFailed", nil)
		}
		return host.RunResult{}, nil
	}
	const swapThenFail = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: swap-then-fail}
steps:
  - id: swap
    runbook: per-node
    rollout: {over: "${ cluster.nodes.map(n, n.name) }", maxUnavailable: 1}
    with: {node: "${ item }"}
  - id: after
    needs: [swap]
    action: host.run
    on: controller-1
    with: {command: "then fail"}
`
	env.ExecuteWorkflow(Runbook, input(t, swapThenFail, nil, perNode))
	_, err := result(t, env)
	if err == nil {
		t.Fatal("the runbook succeeded")
	}
	var undo []string
	for _, c := range f.Calls() {
		if strings.HasPrefix(c, "restore ") || strings.HasPrefix(c, "run restart-after-undo") {
			undo = append(undo, c)
		}
	}
	want := []string{
		"restore /etc/x from /var/lib/kedge/backup/x@worker-2", "run restart-after-undo@worker-2",
		"restore /etc/x from /var/lib/kedge/backup/x@worker-1", "run restart-after-undo@worker-1",
		"restore /etc/x from /var/lib/kedge/backup/x@controller-1", "run restart-after-undo@controller-1",
	}
	if !slices.Equal(undo, want) {
		t.Errorf("undo calls:\n%v\nwant\n%v", undo, want)
	}
	if s := stepState(progress(t, env), "swap"); s.Undo != StateUndone {
		t.Errorf("swap: undo %q", s.Undo)
	}
}

// A rollout whose only item failed has nothing left to decide: it fails,
// never succeeds with the failure in its outputs (a cert-renewal over one
// controller once exited 0 after the controller's renewal was undone).
func TestARolloutWhoseEveryItemFailedFails(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if in.Command == "work controller-1" {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken controller-1", "CommandFailed", nil)
		}
		return host.RunResult{}, nil
	}
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "renew", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1}
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	if !env.IsWorkflowCompleted() {
		t.Fatal("rollout did not complete")
	}
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != "RolloutFailed" || !strings.Contains(err.Error(), "controller-1") || !strings.Contains(err.Error(), "broken controller-1") {
		t.Fatalf("want RolloutFailed naming controller-1 and why, got %v", err)
	}
	var res RolloutResult
	if !app.HasDetails() || app.Details(&res) != nil || !slices.Equal(res.Failed, []string{"controller-1"}) || len(res.Done) != 0 {
		t.Errorf("result: %+v", res)
	}
}

// With everyItemFailed: pause, a rollout whose only item failed pauses
// for a decision like any rollout past its budget (cluster-upgrade's
// first API server: a person looks before the run undoes): continue
// accepts the failure, abort fails the rollout.
func TestARolloutWhoseEveryItemFailedPausesWhenAskedTo(t *testing.T) {
	for _, decision := range []string{DecisionContinue, DecisionAbort} {
		t.Run(decision, func(t *testing.T) {
			env, f := newEnv(t)
			f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
				return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken controller-1", "CommandFailed", nil)
			}
			in := input(t, perNode, map[string]any{"node": "x"})
			ri := RolloutInput{Step: "first", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1"},
				With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1,
				PauseWhenEveryItemFailed: true}
			var u updateResult
			var paused Progress
			env.RegisterDelayedCallback(func() {
				if v, err := env.QueryWorkflow(ProgressQuery); err == nil {
					_ = v.Get(&paused)
				}
				env.UpdateWorkflow(DecideUpdate, "1", &u, bind(t, env, Decision{Decision: decision, By: "bob"}))
			}, time.Hour)
			asChild(env)
			env.ExecuteWorkflow(Rollout, ri)
			if !env.IsWorkflowCompleted() || u.err != nil {
				t.Fatalf("rollout did not complete (decision %v)", u.err)
			}
			if paused.State != StateWaiting || paused.Nonce == "" {
				t.Errorf("an hour after its only item failed the rollout is %s", paused.State)
			}
			err := env.GetWorkflowError()
			switch decision {
			case DecisionContinue:
				var res RolloutResult
				if err != nil || env.GetWorkflowResult(&res) != nil || !slices.Equal(res.Failed, []string{"controller-1"}) || len(res.Done) != 0 {
					t.Errorf("continue: %v %+v", err, res)
				}
			case DecisionAbort:
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != "RolloutAborted" || !strings.Contains(err.Error(), "aborted by bob") {
					t.Errorf("abort: %v: %v", err, f.Calls())
				}
			}
		})
	}
}

// When the last item fails past the budget after others completed, the
// rollout pauses as it does mid-way: an operator accepts (continue) or
// undoes the completed ones (abort). Undecided, it never succeeds.
func TestARolloutWhoseLastItemFailsPausesForADecision(t *testing.T) {
	for _, decision := range []string{DecisionContinue, DecisionAbort} {
		t.Run(decision, func(t *testing.T) {
			env, f := newEnv(t)
			f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
				if in.Command == "work worker-2" {
					return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken worker-2", "CommandFailed", nil)
				}
				return host.RunResult{}, nil
			}
			in := input(t, perNode, map[string]any{"node": "x"})
			ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1", "worker-1", "worker-2"},
				With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1}
			var u updateResult
			paused := false
			env.RegisterDelayedCallback(func() {
				var p Progress
				if v, err := env.QueryWorkflow(ProgressQuery); err == nil && v.Get(&p) == nil {
					paused = p.State == StateWaiting
				}
				env.UpdateWorkflow(DecideUpdate, "1", &u, bind(t, env, Decision{Decision: decision, By: "bob"}))
			}, time.Hour)
			asChild(env)
			env.ExecuteWorkflow(Rollout, ri)
			if !env.IsWorkflowCompleted() || u.err != nil {
				t.Fatalf("rollout did not complete (decision %v)", u.err)
			}
			if !paused {
				t.Error("the rollout was not paused an hour after its last item failed")
			}
			err := env.GetWorkflowError()
			calls := f.Calls()
			undone := slices.Contains(calls, "restore /etc/x from /var/lib/kedge/backup/x@worker-1")
			switch decision {
			case DecisionContinue:
				var res RolloutResult
				if err != nil || env.GetWorkflowResult(&res) != nil || !slices.Equal(res.Failed, []string{"worker-2"}) || undone {
					t.Errorf("continue: %v %+v (undone %v)", err, res, undone)
				}
			case DecisionAbort:
				if err == nil || !strings.Contains(err.Error(), "aborted by bob") || !undone {
					t.Errorf("abort: %v (undone %v): %v", err, undone, calls)
				}
			}
		})
	}
}

// A rollout with a window starts items only while it is open: the run
// waits (a durable timer) for the opening, spaces the items by its
// delay, stops between items when the window closes, and goes on with
// the items left in the next opening. Progress says what it waits for.
func TestRolloutWaitsForItsWindow(t *testing.T) {
	env, f := newEnv(t)
	start := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC) // a Friday
	env.SetStartTime(start)
	var mu sync.Mutex
	started := map[string]time.Time{}
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if strings.HasPrefix(in.Command, "work") {
			mu.Lock()
			started[in.Target.Node] = env.Now().UTC()
			mu.Unlock()
		}
		return host.RunResult{}, nil
	}
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1", "worker-1", "worker-2"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1,
		Window: &window.Spec{Schedule: "0 2 * * SAT", Duration: "1h"}, Delay: 40 * time.Minute}
	var waiting string
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(ProgressQuery)
		if err != nil {
			t.Errorf("progress: %v", err)
			return
		}
		var p Progress
		if err := v.Get(&p); err != nil {
			t.Errorf("progress: %v", err)
		}
		waiting = p.Waiting
	}, time.Hour)
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("rollout failed: %v", err)
	}
	sat := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	near := func(got, want time.Time) bool { return !got.Before(want) && got.Sub(want) < 5*time.Minute }
	if !near(started["controller-1"], sat) || !near(started["worker-1"], sat.Add(40*time.Minute)) {
		t.Errorf("the first two items did not start at the opening and a delay after: %v", started)
	}
	// 02:40 + 40m is past 03:00: the third waits a week.
	if !near(started["worker-2"], sat.AddDate(0, 0, 7)) {
		t.Errorf("worker-2 started at %v, want the next opening %v", started["worker-2"], sat.AddDate(0, 0, 7))
	}
	if want := "waiting for the next window: Sat 02:00 UTC"; waiting != want {
		t.Errorf("progress said %q, want %q", waiting, want)
	}
}

// fakeAlerts stands in for prometheus.alerts: what fires at a moment of
// the test's clock, and every question asked, by the time asked.
type fakeAlerts struct {
	mu     sync.Mutex
	asked  []time.Time
	firing func(now time.Time) ([]string, error)
}

func (a *fakeAlerts) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(ctx context.Context, in prometheus.AlertsInput) (prometheus.AlertsResult, error) {
		now := env.Now().UTC()
		a.mu.Lock()
		a.asked = append(a.asked, now)
		a.mu.Unlock()
		names, err := a.firing(now)
		return prometheus.AlertsResult{Names: names}, err
	}, activity.RegisterOptions{Name: prometheus.AlertsAction})
}

// A rollout's alert gate holds it while an alert of its set fires (and
// while Prometheus does not answer: nothing says all is well): no item
// starts, progress says why, it asks again on a durable timer, and goes
// on once they clear.
func TestRolloutHeldWhileItsAlertsFire(t *testing.T) {
	env, f := newEnv(t)
	start := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	var mu sync.Mutex
	started := map[string]time.Time{}
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if strings.HasPrefix(in.Command, "work") {
			mu.Lock()
			started[in.Target.Node] = env.Now().UTC()
			mu.Unlock()
		}
		return host.RunResult{}, nil
	}
	clears := start.Add(10 * time.Minute)
	alerts := &fakeAlerts{firing: func(now time.Time) ([]string, error) {
		switch {
		case now.Before(start.Add(2 * time.Minute)):
			return nil, temporal.NewApplicationError("dial tcp: connection refused", errtype.PrometheusUnreachable)
		case now.Before(clears):
			return []string{"NodeDown"}, nil
		}
		return []string{}, nil
	}}
	alerts.register(env)
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"controller-1", "worker-1", "worker-2"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1,
		Alerts: &plan.AlertGate{URL: "http://prometheus:9090", Names: []string{"NodeDown"}, Recheck: time.Minute, PauseAfter: time.Hour}}
	waiting := map[time.Duration]string{}
	for _, at := range []time.Duration{time.Minute, 5 * time.Minute} {
		env.RegisterDelayedCallback(func() { waiting[at] = progress(t, env).Waiting }, at)
	}
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("rollout failed: %v", err)
	}
	for node, at := range started {
		if at.Before(clears) {
			t.Errorf("%s started at %s, while its alerts fired (until %s)", node, at.Format("15:04:05"), clears.Format("15:04:05"))
		}
	}
	if len(started) != 3 {
		t.Errorf("started %v, want every item", started)
	}
	if w := waiting[time.Minute]; !strings.Contains(w, "held: alerts unknown: ") || !strings.Contains(w, "connection refused") {
		t.Errorf("progress at 1m said %q, want the alerts unknown", w)
	}
	if want := "held: alerts firing: NodeDown (since 02:00:"; !strings.HasPrefix(waiting[5*time.Minute], want) {
		t.Errorf("progress at 5m said %q, want it to start %q", waiting[5*time.Minute], want)
	}
	// Asked once a minute while held (each unanswered question three
	// times, seconds apart), and once before each item after: 6 + 8 + 3.
	alerts.mu.Lock()
	defer alerts.mu.Unlock()
	if n := len(alerts.asked); n != 17 {
		t.Errorf("asked %d times: %v", n, alerts.asked)
	}
}

// Alerts that hold a rollout past pauseAfter pause it for a decision;
// continue holds again until they clear, then the items go on.
func TestRolloutPausesWhenItsAlertsFireTooLong(t *testing.T) {
	env, f := newEnv(t)
	start := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	var mu sync.Mutex
	var works []time.Time
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if strings.HasPrefix(in.Command, "work") {
			mu.Lock()
			works = append(works, env.Now().UTC())
			mu.Unlock()
		}
		return host.RunResult{}, nil
	}
	clears := start.Add(20 * time.Minute)
	alerts := &fakeAlerts{firing: func(now time.Time) ([]string, error) {
		if now.Before(clears) {
			return []string{"EtcdDown", "NodeDown"}, nil
		}
		return []string{}, nil
	}}
	alerts.register(env)
	in := input(t, perNode, map[string]any{"node": "x"})
	ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"worker-1", "worker-2"},
		With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1,
		Alerts: &plan.AlertGate{URL: "http://prometheus:9090", Names: []string{"NodeDown", "EtcdDown"}, Recheck: time.Minute, PauseAfter: 10 * time.Minute}}
	var paused Progress
	var u updateResult
	env.RegisterDelayedCallback(func() {
		paused = progress(t, env)
		env.UpdateWorkflow(DecideUpdate, "1", &u, bind(t, env, Decision{Decision: DecisionContinue, By: "bob"}))
	}, 15*time.Minute)
	asChild(env)
	env.ExecuteWorkflow(Rollout, ri)
	if err := env.GetWorkflowError(); err != nil || u.err != nil {
		t.Fatalf("rollout: %v (decision %v)", err, u.err)
	}
	if paused.State != StateWaiting || paused.Nonce == "" || !strings.HasPrefix(paused.Error, "paused: alerts firing: EtcdDown, NodeDown, holding for 10m0s") ||
		paused.AlertPause != 1 || !strings.HasPrefix(paused.Waiting, "alerts firing: EtcdDown, NodeDown") {
		t.Errorf("at 15m: state %s, error %q, waiting %q, alert pause %d: want paused for the alerts", paused.State, paused.Error, paused.Waiting, paused.AlertPause)
	}
	var res RolloutResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Done, []string{"worker-1", "worker-2"}) || len(works) != 2 || works[0].Before(clears) {
		t.Errorf("result %+v, items worked at %v (alerts cleared at %s)", res, works, clears.Format("15:04:05"))
	}
}
