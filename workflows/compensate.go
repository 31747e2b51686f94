package workflows

import (
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/expr"
)

// Compensate runs rendered undo actions in order (the compensation of a
// completed runbook).
func Compensate(ctx workflow.Context, calls []UndoCall) error {
	ctx = withCalls(ctx)
	if err := admitChild(ctx, "compensation", len(calls) == 0); err != nil {
		return err
	}
	var failed []string
	for _, call := range calls {
		if err := runUndoCall(ctx, call); err != nil {
			failed = append(failed, call.Step+": "+errorMessage(err))
		}
	}
	if len(failed) > 0 {
		return temporal.NewNonRetryableApplicationError("undo failed: "+strings.Join(failed, "; "), errtype.UndoFailed, nil)
	}
	return nil
}

// undoChange is the workflow.GetVersion change id of undoing completed
// child runbooks and rollouts when a run fails after them: runs that
// began before it undo their own steps' undo lists only.
const undoChange = "undo-children"

// compensation renders the undo actions of every completed step, newest
// step first, each step's actions in the order written. Its renders draw
// on a budget of their own (undoSpend): a run that spent its budget on its
// steps can still be undone.
func (r *run) compensation(ctx workflow.Context) []UndoCall {
	sc := r.sc
	sc.Spend = r.undoSpend
	var calls []UndoCall
	for k := len(r.completed) - 1; k >= 0; k-- {
		c := r.completed[k]
		s := r.steps[c.step]
		if r.undoChildren {
			for _, call := range s.childUndo {
				call.Step = s.spec.ID // shown on the step that ran the child
				calls = append(calls, call)
			}
		}
		for _, u := range s.spec.Undo {
			pace(ctx, sc.Spend)
			vars := r.vars()
			steps := vars["steps"].(map[string]any)
			steps[s.spec.ID] = map[string]any{"state": s.p.State, "outputs": s.outputs}
			uc, err := sc.Undo(s.spec.ID, u, c.host, expr.WithSpend(vars, sc.Spend))
			call := UndoCall{Step: s.spec.ID, Action: u.Action, Host: uc.Host, Input: uc.Input, TaskQueue: uc.TaskQueue, Retry: s.spec.Retry, Timeout: s.spec.Timeout}
			if err != nil {
				call.Error = err.Error()
			}
			calls = append(calls, call)
		}
	}
	return calls
}

// undo runs the compensation of every completed step. It runs even when
// the runbook was cancelled.
func (r *run) undo(ctx workflow.Context) {
	uctx, _ := workflow.NewDisconnectedContext(ctx)
	for _, call := range r.compensation(uctx) {
		s := r.steps[r.index[call.Step]]
		if s.p.Undo == "" {
			s.p.Undo = StateUndoing
		}
		if err := runUndoCall(uctx, call); err != nil {
			s.p.Undo = StateUndoFailed
			s.p.LastError = "undo: " + errorMessage(err)
		}
	}
	for _, s := range r.steps {
		if s.p.Undo == StateUndoing {
			s.p.Undo = StateUndone
		}
	}
}

// runUndoCall runs one rendered undo action with its step's retry policy.
func runUndoCall(ctx workflow.Context, call UndoCall) error {
	if call.Error != "" {
		return temporal.NewNonRetryableApplicationError(call.Error, errtype.InvalidInput, nil)
	}
	action, _ := actions.Lookup(call.Action)
	undoStep := &stepRun{spec: runbooks.Step{ID: call.Step + "-undo", Retry: call.Retry, Timeout: call.Timeout}, p: &StepProgress{}}
	_, _, err := callAction(onSite(ctx, call.TaskQueue), undoStep, action, call.Host, call.Input)
	return err
}
