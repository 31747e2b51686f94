package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runbooks/plan"
)

// Runbook runs a runbook's DAG: every step whose needs are met starts at
// once; a failed step stops new scheduling, lets running siblings finish,
// then the undo of every completed step runs in reverse completion order.
func Runbook(ctx workflow.Context, in RunbookInput) (RunbookResult, error) {
	ctx = withCalls(ctx)
	r := newRun(ctx, in)
	r.ui = newUI(ctx)
	e := workflow.GetInfo(ctx).WorkflowExecution
	r.exec = Execution{WorkflowID: e.ID, RunID: e.RunID}
	r.progress.RunID = e.RunID
	if err := workflow.SetQueryHandlerWithOptions(ctx, ProgressQuery, r.progressQuery, workflow.QueryHandlerOptions{
		Description: "every step's state, attempts, start/end times and last error",
	}); err != nil {
		return RunbookResult{}, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, ApproveUpdate, r.approve, workflow.UpdateHandlerOptions{
		Validator:   r.validateDecision,
		Description: "approve or reject a step waiting for approval",
	}); err != nil {
		return RunbookResult{}, err
	}
	if err := admitRunbook(ctx, &in); err != nil {
		return RunbookResult{}, err
	}
	if in.Preview && r.gate < 0 {
		return RunbookResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("runbook %s has no preview gate (an approval with preview: true): there is nothing to preview", in.Runbook.Name), errtype.InvalidInput, nil)
	}
	r.undoChildren = workflow.GetVersion(ctx, undoChange, workflow.DefaultVersion, 1) == 1
	if workflow.GetVersion(ctx, renderSpendChange, workflow.DefaultVersion, 1) == 1 {
		r.sc.Spend, r.undoSpend = expr.NewSpend(), expr.NewSpend()
	}
	err := r.execute(ctx)
	res := RunbookResult{Progress: r.snapshot()}
	if err == nil {
		res.Compensation = r.compensation(ctx)
	}
	return res, err
}

// renderSpendChange versions the run's render budget (expr.Spend) and the
// pacing of renders across workflow tasks: runs started before replay
// without either.
const renderSpendChange = "kedge-render-spend"

// pace ends the workflow task before more renders once this task has
// rendered expr.TaskCostLimit: a runbook of many costly conditions, or
// many undos, then renders across several short tasks instead of one that
// outlives its timeout and is retried for ever. A task is told from the
// next by the history's length when it began.
func pace(ctx workflow.Context, sp *expr.Spend) {
	if sp == nil {
		return
	}
	for {
		before := int64(workflow.GetInfo(ctx).GetCurrentHistoryLength())
		sp.Task(before)
		if !sp.MustYield() {
			return
		}
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return // cancelled: the renders that follow fail or are skipped on their own
		}
		if int64(workflow.GetInfo(ctx).GetCurrentHistoryLength()) == before {
			sp.Task(before - 1) // a history that does not count (the SDK's test environment): the sleep ended a task
		}
	}
}

type run struct {
	in       RunbookInput
	rb       *runbooks.Runbook
	progress Progress
	steps    []*stepRun
	index    map[string]int
	// completed lists (step, host) pairs in the order they succeeded; undo
	// walks it backwards.
	completed []completion
	done      workflow.Channel
	sc        plan.Scope  // what the run's calls are decided against
	undoSpend *expr.Spend // what its undo's renders may spend
	ui        ui
	exec      Execution // this run: decisions must name it
	// undoChildren: the undo of a failed run includes what its completed
	// child runbooks and rollouts did (undoChange).
	undoChildren bool
	// gate is the runbook's preview gate (-1: none); in a preview only
	// the steps in previewed (the gate and what it needs) start.
	gate      int
	previewed map[int]bool
	// restoreBy is who answered a pause of one of the run's rollouts
	// with restore ("" when nobody did); restoring is set once the run
	// failed and was undone, and its restore steps may start.
	restoreBy string
	restoring bool
}

type stepRun struct {
	spec    runbooks.Step
	p       *StepProgress
	outputs any
	// hosts and which of them succeeded, for undo of fan-out steps.
	hosts    []string
	single   bool
	decision *Decision
	// childUndo is what a completed child runbook or rollout returned to
	// undo it, run before the step's own undo (undoChange).
	childUndo []UndoCall
}

type completion struct {
	step int
	host string // "" for steps not on a host
}

func newRun(ctx workflow.Context, in RunbookInput) *run {
	r := &run{in: in, rb: &in.Runbook, index: map[string]int{}, done: workflow.NewBufferedChannel(ctx, len(in.Runbook.Steps))}
	r.sc = plan.Scope{Runbook: r.rb, Children: in.Children, Params: in.Params, Cluster: &r.in.Cluster}
	r.progress = Progress{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Runbook: in.Runbook.Name, Cluster: in.Cluster.Name, State: StateRunning, StartedAt: workflow.Now(ctx)}
	r.progress.Steps = make([]StepProgress, len(in.Runbook.Steps))
	for i, s := range in.Runbook.Steps {
		r.progress.Steps[i] = StepProgress{ID: s.ID, Kind: s.Kind(), Action: s.Action, State: StatePending}
		if s.Approval != nil {
			r.progress.Steps[i].Prompt = s.Approval.Prompt
		}
		r.steps = append(r.steps, &stepRun{spec: s, p: &r.progress.Steps[i]})
		r.index[s.ID] = i
	}
	r.gate = in.Runbook.PreviewGate()
	if in.Preview && r.gate >= 0 {
		r.progress.Preview = true
		r.previewed = map[int]bool{}
		var mark func(int)
		mark = func(i int) {
			if r.previewed[i] {
				return
			}
			r.previewed[i] = true
			for _, need := range r.rb.Steps[i].Needs {
				mark(r.index[need])
			}
		}
		mark(r.gate)
	}
	return r
}

// mayStart: outside a preview every step; in one, the gate and the steps
// it needs.
func (r *run) mayStart(i int) bool {
	return !r.in.Preview || r.previewed[i]
}

func (r *run) progressQuery() (Progress, error) {
	return r.snapshot(), nil
}

func (r *run) snapshot() Progress {
	p := r.progress
	p.Steps = slices.Clone(r.progress.Steps)
	return p
}

// vars are the variables expressions see: params, cluster, and every
// finished step's state and outputs.
func (r *run) vars() map[string]any {
	steps := map[string]any{}
	for _, s := range r.steps {
		switch s.p.State {
		case StateSucceeded, StateSkipped, StateFailed:
			steps[s.spec.ID] = map[string]any{"state": s.p.State, "outputs": s.outputs}
		}
	}
	return r.sc.Vars(steps)
}

func (r *run) execute(ctx workflow.Context) error {
	failed := r.drive(ctx)
	notRun := func(phase string) {
		for _, s := range r.steps {
			if s.p.State == StatePending && s.spec.Phase == phase {
				s.p.State = StateNotRun
			}
		}
	}
	notRun("")
	end := func(state string, err error) error {
		notRun(runbooks.PhaseRestore)
		r.renderOutputs()
		now := workflow.Now(ctx)
		r.progress.EndedAt = &now
		r.progress.State = state
		if err != nil {
			r.progress.Error = err.Error()
		}
		r.updateDetails(ctx)
		return err
	}
	if ctx.Err() != nil {
		r.undo(ctx)
		return end(StateCancelled, temporal.NewCanceledError("runbook cancelled"))
	}
	if failed {
		var names []string
		for _, s := range r.steps {
			if s.p.State == StateFailed {
				names = append(names, fmt.Sprintf("%s (%s)", s.spec.ID, s.p.LastError))
			}
		}
		r.undo(ctx)
		msg := fmt.Sprintf("runbook %s failed at step %s", r.rb.Name, strings.Join(names, "; "))
		if r.restoreBy != "" {
			// A person chose restore at a pause: with what the run did
			// undone, its restore steps run.
			r.restoring = true
			msg += fmt.Sprintf("; restore asked by %s: %s", r.restoreBy, r.restored(ctx))
		}
		return end(StateFailed, temporal.NewNonRetryableApplicationError(msg, "RunbookFailed", nil))
	}
	return end(StateSucceeded, nil)
}

// restored runs the restore steps and says how they ended.
func (r *run) restored(ctx workflow.Context) string {
	if ctx.Err() != nil {
		return "not run: the run was cancelled"
	}
	r.drive(ctx)
	var done, failed []string
	for _, s := range r.steps {
		if s.spec.Phase != runbooks.PhaseRestore {
			continue
		}
		switch s.p.State {
		case StateSucceeded, StateSkipped:
			done = append(done, s.spec.ID)
		case StateFailed, StateCancelled:
			failed = append(failed, fmt.Sprintf("%s (%s)", s.spec.ID, s.p.LastError))
		}
	}
	if len(failed) > 0 {
		return "RESTORE FAILED at " + strings.Join(failed, "; ")
	}
	return "restored (" + strings.Join(done, ", ") + ")"
}

// drive starts every ready step and waits for what runs, until nothing
// runs; it says whether a step failed or was cancelled (nothing new
// starts after that).
func (r *run) drive(ctx workflow.Context) bool {
	waitCtx, _ := workflow.NewDisconnectedContext(ctx)
	running := 0
	failed := false
	for {
		if !failed && ctx.Err() == nil {
			started := false
			for i, s := range r.steps {
				if s.p.State == StatePending && r.ready(i) && r.mayStart(i) {
					started = true
					running++
					s.p.State = StateRunning
					now := workflow.Now(ctx)
					s.p.StartedAt = &now
					workflow.Go(ctx, func(ctx workflow.Context) {
						r.runStep(ctx, i)
						r.done.Send(ctx, i)
					})
				}
			}
			if started {
				r.updateDetails(ctx)
			}
		}
		if running == 0 {
			break
		}
		var i int
		r.done.Receive(waitCtx, &i)
		running--
		s := r.steps[i]
		now := workflow.Now(ctx)
		s.p.EndedAt = &now
		if s.p.State == StateFailed || s.p.State == StateCancelled {
			failed = true
		}
		r.updateDetails(ctx)
	}
	return failed
}

// renderOutputs renders the runbook's outputs from what its steps did.
func (r *run) renderOutputs() {
	if len(r.rb.Outputs) == 0 {
		return
	}
	vars := r.vars()
	r.progress.Outputs = map[string]any{}
	for _, name := range r.rb.OutputNames() {
		v, err := expr.RenderValue(r.rb.Outputs[name], vars)
		if err != nil {
			if r.progress.OutputErrors == nil {
				r.progress.OutputErrors = map[string]string{}
			}
			r.progress.OutputErrors[name] = "unavailable: " + err.Error()
			continue
		}
		r.progress.Outputs[name] = v
	}
}

// ready: every need has succeeded or was skipped; a restore step only
// once the run is restoring, and then no other.
func (r *run) ready(i int) bool {
	if (r.steps[i].spec.Phase == runbooks.PhaseRestore) != r.restoring {
		return false
	}
	for _, need := range r.steps[i].spec.Needs {
		switch r.steps[r.index[need]].p.State {
		case StateSucceeded, StateSkipped:
		default:
			return false
		}
	}
	return true
}

func (r *run) runStep(ctx workflow.Context, i int) {
	s := r.steps[i]
	pace(ctx, r.sc.Spend)
	vars := r.vars()
	if r.in.Preview && i == r.gate {
		// The prompt says what the run would do; nobody decides on it.
		prompt, err := expr.RenderValue(s.spec.Approval.Prompt, vars)
		if err != nil {
			r.fail(s, temporal.NewNonRetryableApplicationError("approval.prompt: "+err.Error(), errtype.InvalidInput, err))
			return
		}
		s.p.Prompt = expr.Stringify(prompt)
		s.p.State = StateNotRun
		return
	}
	if s.spec.When != "" {
		ok, err := plan.When(s.spec.When, vars)
		if err != nil {
			r.fail(s, fmt.Errorf("when: %w", err))
			return
		}
		if !ok {
			s.p.State = StateSkipped
			return
		}
	}
	var err error
	switch {
	case s.spec.Action != "":
		err = r.runAction(ctx, i, vars)
	case s.spec.Rollout != nil:
		err = r.runRollout(ctx, i, vars)
	case s.spec.Runbook != "":
		err = r.runChild(ctx, i, vars)
	case s.spec.Approval != nil:
		err = r.waitApproval(ctx, i, vars)
	}
	switch {
	case err == nil:
		s.p.State = StateSucceeded
	case temporal.IsCanceledError(err) || ctx.Err() != nil:
		s.p.State = StateCancelled
		s.p.LastError = errorMessage(err)
	default:
		r.fail(s, err)
	}
}

func (r *run) fail(s *stepRun, err error) {
	s.p.State = StateFailed
	s.p.LastError = errorMessage(err)
}

// errorMessage is the operator-facing text of an error: the innermost
// application error's message, without Temporal's wrapping.
func errorMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Error()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "timed out (" + strings.ToLower(strings.TrimPrefix(timeout.TimeoutType().String(), "TIMEOUT_TYPE_")) + ")"
	}
	return err.Error()
}

// runAction runs the step's action on each of its hosts (or once when it
// targets none), each with its own retries.
func (r *run) runAction(ctx workflow.Context, i int, vars map[string]any) error {
	s := r.steps[i]
	action, ok := actions.Lookup(s.spec.Action)
	if !ok {
		return temporal.NewNonRetryableApplicationError("unknown action "+s.spec.Action, errtype.InvalidInput, nil)
	}
	if !action.Target.NeedsOn() {
		out, attempts, err := r.attempts(ctx, s, action, "", vars)
		s.p.Attempts = attempts
		s.outputs = out
		if err == nil {
			r.completed = append(r.completed, completion{step: i})
		}
		return err
	}
	hosts, single, err := r.sc.Hosts(s.spec.On, vars)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("on: "+err.Error(), errtype.InvalidInput, err)
	}
	if len(hosts) == 0 {
		return nil // nothing to do: an empty node list
	}
	s.hosts, s.single = hosts, single
	s.p.Hosts = make([]HostProgress, len(hosts))
	results := make([]any, len(hosts))
	errs := make([]error, len(hosts))
	wg := workflow.NewWaitGroup(ctx)
	for h, name := range hosts {
		s.p.Hosts[h] = HostProgress{Name: name, State: StateRunning}
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			out, attempts, err := r.attempts(ctx, s, action, name, vars)
			hp := &s.p.Hosts[h]
			hp.Attempts = attempts
			s.p.Attempts = max(s.p.Attempts, attempts)
			results[h], errs[h] = out, err
			if err != nil {
				hp.State, hp.LastError = StateFailed, errorMessage(err)
				if temporal.IsCanceledError(err) {
					hp.State = StateCancelled
				}
				return
			}
			hp.State = StateSucceeded
			r.completed = append(r.completed, completion{step: i, host: name})
		})
	}
	wg.Wait(ctx)
	if single {
		s.outputs = results[0]
	} else {
		byHost := map[string]any{}
		for h, name := range hosts {
			byHost[name] = results[h]
		}
		s.outputs = byHost
	}
	var failed []string
	for h, err := range errs {
		if err != nil {
			if temporal.IsCanceledError(err) {
				return err
			}
			failed = append(failed, hosts[h]+": "+errorMessage(err))
		}
	}
	if len(failed) > 0 {
		if single {
			return errs[0]
		}
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// attempts runs one action on one host (or none) under the step's retry
// policy. Retries are driven here rather than by the server so the progress
// query sees every attempt and its error.
func (r *run) attempts(ctx workflow.Context, s *stepRun, action actions.Action, host string, vars map[string]any) (any, int, error) {
	call, err := r.sc.Call(s.spec.ID, action, host, s.spec.With, vars)
	if err != nil {
		return nil, 0, temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	return callAction(onSite(ctx, call.TaskQueue), s, action, host, call.Input)
}

// onSite schedules the activities of ctx on the task queue of the workers
// that reach a site (the inventory's taskQueue, per cluster or node). With
// none named they stay on the runbook's own queue, as they always did, so
// recorded histories replay unchanged.
func onSite(ctx workflow.Context, queue string) workflow.Context {
	if queue == "" {
		return ctx
	}
	return workflow.WithTaskQueue(ctx, queue)
}

// runChild runs a child runbook as a child workflow whose ID extends ours.
func (r *run) runChild(ctx workflow.Context, i int, vars map[string]any) error {
	s := r.steps[i]
	c, err := r.sc.Child(s.spec, vars)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	child, params := c.Runbook, c.Params
	id := ChildWorkflowID(workflow.GetInfo(ctx).WorkflowExecution.ID, s.spec.ID)
	s.p.Child = id
	s.p.Attempts = 1
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowRunTimeout:    s.spec.Timeout,
		WaitForCancellation:   true,
		StaticSummary:         fmt.Sprintf("%s: runbook %s on %s", s.spec.ID, child.Name, r.in.Cluster.Name),
		TypedSearchAttributes: r.ui.childLabels(r.in.Cluster.Name, child.Name, runNode(&child, params, &r.in.Cluster)),
	})
	var res RunbookResult
	err = workflow.ExecuteChildWorkflow(cctx, r.ui.childType(child.Name), RunbookInput{
		Runbook: child, Children: r.in.Children, Params: params, Cluster: r.in.Cluster,
		Admission: childAdmission(ctx),
	}).Get(ctx, &res)
	if err != nil {
		return err
	}
	out := map[string]any{"state": res.Progress.State}
	for _, name := range child.OutputNames() {
		if v, ok := res.Progress.Outputs[name]; ok {
			out[name] = v
		}
	}
	s.outputs = out
	s.childUndo = res.Compensation
	r.completed = append(r.completed, completion{step: i})
	return nil
}

// runRollout runs the step's child runbook over its items as a rollout
// workflow.
func (r *run) runRollout(ctx workflow.Context, i int, vars map[string]any) error {
	s := r.steps[i]
	ro, err := r.sc.Rollout(s.spec, vars)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("rollout: "+err.Error(), errtype.InvalidInput, err)
	}
	child, items := ro.Runbook, ro.Items
	id := ChildWorkflowID(workflow.GetInfo(ctx).WorkflowExecution.ID, s.spec.ID)
	s.p.Child, s.p.Attempts, s.p.Kind = id, 1, "rollout"
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WaitForCancellation:   true,
		StaticSummary:         fmt.Sprintf("%s: rollout of %s over %d items on %s", s.spec.ID, child.Name, len(items), r.in.Cluster.Name),
		TypedSearchAttributes: r.ui.childLabels(r.in.Cluster.Name, r.rb.Name, ""),
	})
	var res RolloutResult
	err = workflow.ExecuteChildWorkflow(cctx, RolloutWorkflow, RolloutInput{
		Step: s.spec.ID, Runbook: child, Children: r.in.Children, Cluster: r.in.Cluster, Items: items,
		With: s.spec.With, Vars: vars, MaxUnavailable: ro.MaxUnavailable, FailureBudget: ro.FailureBudget,
		PauseWhenEveryItemFailed: s.spec.Rollout.EveryItemFailed == runbooks.EveryItemFailedPause,
		Restore:                  r.rb.HasRestore() && s.spec.Phase != runbooks.PhaseRestore,
		Window:                   ro.Window, Delay: ro.Delay, Alerts: ro.Alerts,
	}).Get(ctx, &res)
	s.outputs = map[string]any{"done": toAny(res.Done), "failed": toAny(res.Failed)}
	if err != nil {
		// Aborted for a restore: the run's restore steps run after its
		// undo.
		var app *temporal.ApplicationError
		var aborted RolloutResult
		if errors.As(err, &app) && app.HasDetails() && app.Details(&aborted) == nil && aborted.RestoreBy != "" {
			r.restoreBy = aborted.RestoreBy
		}
		return err
	}
	s.childUndo = res.Compensation
	r.completed = append(r.completed, completion{step: i})
	return nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, e := range s {
		out[i] = e
	}
	return out
}

// validateDecision rejects a decision for a step that is not waiting.
func (r *run) validateDecision(d Decision) error {
	i, ok := r.index[d.Step]
	if !ok {
		return fmt.Errorf("runbook %s has no step %q", r.rb.Name, d.Step)
	}
	s := r.steps[i]
	if s.spec.Approval == nil {
		return fmt.Errorf("step %s is not an approval", d.Step)
	}
	if s.p.State != StateWaiting {
		return fmt.Errorf("step %s is %s, not waiting for approval", d.Step, s.p.State)
	}
	if d.Decision != DecisionApprove && d.Decision != DecisionReject {
		return fmt.Errorf("decision must be %s or %s, got %q", DecisionApprove, DecisionReject, d.Decision)
	}
	if strings.TrimSpace(d.By) == "" {
		return errors.New("a decision must say who made it")
	}
	return checkBound(d, r.exec, s.p.Nonce)
}

func (r *run) approve(ctx workflow.Context, d Decision) (Decision, error) {
	s := r.steps[r.index[d.Step]]
	d.At = workflow.Now(ctx)
	s.decision = &d
	s.p.Decision = &d
	return d, nil
}

func (r *run) waitApproval(ctx workflow.Context, i int, vars map[string]any) error {
	s := r.steps[i]
	// What the operator decides on may be what earlier steps found: the
	// prompt's ${ } are rendered as the gate opens. A prompt that cannot
	// be rendered fails the step before anyone can approve it.
	prompt, err := expr.RenderValue(s.spec.Approval.Prompt, vars)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("approval.prompt: "+err.Error(), errtype.InvalidInput, err)
	}
	s.p.Prompt = expr.Stringify(prompt)
	s.p.State = StateWaiting
	s.p.Attempts = 1
	s.p.Nonce = pauseNonce(r.exec.RunID, "approval/"+s.spec.ID)
	r.updateDetails(ctx)
	cond := func() bool { return s.decision != nil }
	if s.spec.Timeout > 0 {
		ok, err := workflow.AwaitWithTimeout(ctx, s.spec.Timeout, cond)
		if err != nil {
			return err
		}
		if !ok {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no decision within %s", s.spec.Timeout), errtype.ApprovalTimeout, nil)
		}
	} else if err := workflow.Await(ctx, cond); err != nil {
		return err
	}
	if s.decision.Decision != DecisionApprove {
		msg := "rejected by " + s.decision.By
		if s.decision.Comment != "" {
			msg += ": " + s.decision.Comment
		}
		return temporal.NewNonRetryableApplicationError(msg, errtype.ApprovalRejected, nil)
	}
	return nil
}
