package workflows

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions/host"
)

// A rollout of a runbook with restore steps takes restore at its pause:
// it aborts as abort does (the completed items undone) and says who asked
// for the restore. Without restore steps the decision is refused.
func TestARolloutPauseTakesRestoreOnlyWhenTheRunbookHasRestoreSteps(t *testing.T) {
	for _, offered := range []bool{true, false} {
		env, f := newEnv(t)
		f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
			if in.Command == "work worker-2" {
				return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken worker-2", "CommandFailed", nil)
			}
			return host.RunResult{}, nil
		}
		in := input(t, perNode, map[string]any{"node": "x"})
		ri := RolloutInput{Step: "swap", Runbook: in.Runbook, Cluster: in.Cluster, Items: []string{"worker-1", "worker-2"},
			With: map[string]any{"node": "${ item }"}, Vars: map[string]any{"params": map[string]any{}}, MaxUnavailable: 1, Restore: offered}
		var restore, abort updateResult
		var shown Progress
		env.RegisterDelayedCallback(func() {
			shown = progress(t, env)
			env.UpdateWorkflow(DecideUpdate, "1", &restore, bind(t, env, Decision{Decision: DecisionRestore, By: "carol"}))
		}, time.Hour)
		env.RegisterDelayedCallback(func() {
			if restore.err != nil {
				env.UpdateWorkflow(DecideUpdate, "2", &abort, bind(t, env, Decision{Decision: DecisionAbort, By: "carol"}))
			}
		}, 2*time.Hour)
		asChild(env)
		env.ExecuteWorkflow(Rollout, ri)
		if !env.IsWorkflowCompleted() {
			t.Fatal("the rollout did not complete")
		}
		err := env.GetWorkflowError()
		var app *temporal.ApplicationError
		var res RolloutResult
		if !errors.As(err, &app) || app.Type() != "RolloutAborted" || app.Details(&res) != nil {
			t.Fatalf("offered %v: %v", offered, err)
		}
		// Chat offers a Restore button from what the paused rollout reports.
		if shown.State != StateWaiting || shown.Restore != offered {
			t.Errorf("offered %v: the paused rollout reports %s, restore %v", offered, shown.State, shown.Restore)
		}
		if !offered {
			if restore.err == nil || !strings.Contains(restore.err.Error(), "the runbook has no restore steps") || res.RestoreBy != "" {
				t.Errorf("restore without restore steps: %v, %+v", restore.err, res)
			}
			continue
		}
		if restore.err != nil || res.RestoreBy != "carol" || !strings.Contains(err.Error(), "aborted by carol after 1 failed (worker-2), for a restore; undone: worker-1") {
			t.Errorf("restore: %v; %v; %+v", restore.err, err, res)
		}
		if !slices.Contains(f.Calls(), "restore /etc/x from /var/lib/kedge/backup/x@worker-1") {
			t.Errorf("worker-1 not undone: %v", f.Calls())
		}
	}
}

// A runbook whose rollout was aborted for a restore undoes what it did,
// then runs its restore steps (which read the others), and fails saying
// so; the restore steps never run otherwise.
func TestARestoreDecisionRunsTheRestoreStepsAfterTheUndo(t *testing.T) {
	const upgrade = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: upgrade}
steps:
  - id: snapshot
    action: host.run
    on: controller-1
    with: {command: "snapshot"}
    undo:
      action: host.run
      on: controller-1
      with: {command: "undo snapshot"}
  - id: swap
    needs: [snapshot]
    runbook: per-node
    rollout: {over: "${ cluster.nodes.map(n, n.name) }", maxUnavailable: 1}
    with: {node: "${ item }"}
  - id: restore-snapshot
    phase: restore
    action: host.run
    on: controller-1
    with: {command: "restore $KEY", env: {KEY: "${ steps.snapshot.outputs.stdout }"}}
  - id: after-restore
    phase: restore
    needs: [restore-snapshot]
    action: host.run
    on: controller-1
    with: {command: "after restore"}
`
	for _, decided := range []string{DecisionRestore, DecisionAbort, ""} {
		t.Run(cmpOr(decided, "succeeded"), func(t *testing.T) {
			env, f := newEnv(t)
			f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
				if in.Command == "snapshot" {
					return host.RunResult{Stdout: "snap-1"}, nil
				}
				return host.RunResult{}, nil
			}
			var restoreOffered bool
			if decided != "" {
				// The rollout as the person left it: aborted, for a
				// restore or not.
				env.OnWorkflow(RolloutWorkflow, mock.Anything, mock.Anything).Return(
					func(_ workflow.Context, ri RolloutInput) (RolloutResult, error) {
						restoreOffered = ri.Restore
						res := RolloutResult{Failed: []string{"worker-1"}, Aborted: true}
						if decided == DecisionRestore {
							res.RestoreBy = "carol"
						}
						return res, temporal.NewNonRetryableApplicationError("rollout swap aborted by carol", "RolloutAborted", nil, res)
					})
			}
			env.ExecuteWorkflow(Runbook, input(t, upgrade, nil, perNode))
			_, err := result(t, env)
			calls := f.Calls()
			ran := func(cmd string) int { return slices.Index(calls, "run "+cmd+"@controller-1") }
			p := progress(t, env)
			switch decided {
			case "":
				if err != nil || ran("restore snap-1") >= 0 || stepState(p, "restore-snapshot").State != StateNotRun {
					t.Errorf("a run that succeeded: %v; %v", err, calls)
				}
			case DecisionAbort:
				if err == nil || ran("undo snapshot") < 0 || ran("restore snap-1") >= 0 || strings.Contains(err.Error(), "restore asked") || !restoreOffered {
					t.Errorf("aborted: %v; %v (offered %v)", err, calls, restoreOffered)
				}
			case DecisionRestore:
				if err == nil || !strings.Contains(err.Error(), "; restore asked by carol: restored (restore-snapshot, after-restore)") {
					t.Errorf("the run's error: %v", err)
				}
				// Undone first, then restored, in the restore steps' order.
				if u, r, a := ran("undo snapshot"), ran("restore snap-1"), ran("after restore"); u < 0 || r < u || a < r {
					t.Errorf("calls: %v", calls)
				}
				if s := stepState(p, "restore-snapshot"); s.State != StateSucceeded {
					t.Errorf("restore-snapshot: %s", s.State)
				}
				if p.State != StateFailed {
					t.Errorf("the run: %s", p.State)
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
