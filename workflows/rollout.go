package workflows

import (
	"fmt"
	"maps"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/plan"
)

// Workflow types and the update a paused rollout waits for.
const (
	RolloutWorkflow    = "rollout"
	CompensateWorkflow = "compensate"
	DecideUpdate       = "decide"
	DecisionContinue   = "continue"
	DecisionAbort      = "abort"
	// DecisionRestore aborts like abort, then has the runbook that runs
	// the rollout run its restore steps (offered only when it has some).
	DecisionRestore = "restore"
)

// DefaultItemsPerRun bounds the items one run of a rollout starts; then it
// lets the running ones finish and continues as new. An item costs about
// eight history events, so a run stays near 4,000 events and a rollout of
// thousands of nodes stays far below Temporal's limits.
const DefaultItemsPerRun = 500

// RolloutInput runs a child runbook over items.
type RolloutInput struct {
	Step           string                      `json:"step"`
	Runbook        runbooks.Runbook            `json:"runbook"`
	Children       map[string]runbooks.Runbook `json:"children,omitempty"`
	Cluster        inventory.Cluster           `json:"cluster"`
	Items          []string                    `json:"items"`
	With           map[string]any              `json:"with,omitempty"`
	Vars           map[string]any              `json:"vars"`
	MaxUnavailable int                         `json:"maxUnavailable"`
	FailureBudget  int                         `json:"failureBudget"`
	ItemsPerRun    int                         `json:"itemsPerRun,omitempty"`
	// PauseWhenEveryItemFailed: a rollout in which no item completed
	// pauses for a decision instead of failing (rollout.everyItemFailed).
	PauseWhenEveryItemFailed bool `json:"pauseWhenEveryItemFailed,omitempty"`
	// Restore: a pause also takes DecisionRestore (the runbook has
	// restore steps).
	Restore bool `json:"restore,omitempty"`
	// Window, when set, is when items may start: while it is closed no
	// item starts (running ones finish) and the rollout waits on a
	// durable timer for its next opening.
	Window *window.Spec `json:"window,omitempty"`
	// Delay is the least time between an item's end and the next start.
	Delay time.Duration `json:"delay,omitempty"`
	// Alerts, when set, is the alert gate: before an item starts the
	// rollout asks Prometheus whether an alert of the set fires; while
	// one does, no item starts (running ones finish), and it asks again
	// on a durable timer; held for Alerts.PauseAfter, it pauses for a
	// decision.
	Alerts *plan.AlertGate `json:"alerts,omitempty"`
	State  RolloutState    `json:"state"`
}

// RolloutState is what a rollout carries across continue-as-new.
type RolloutState struct {
	Next      int          `json:"next"`
	Done      []ItemResult `json:"done,omitempty"`
	Failed    []ItemResult `json:"failed,omitempty"`
	Budget    int          `json:"budget"` // failures tolerated before pausing
	Decisions []Decision   `json:"decisions,omitempty"`
	Runs      int          `json:"runs"`
	// LastEnd is when the last item ended (for Delay).
	LastEnd time.Time `json:"lastEnd,omitzero"`
	// HeldSince is when the alert gate began holding the rollout (zero:
	// it does not), or when a decision last let it go on.
	HeldSince time.Time `json:"heldSince,omitzero"`
}

// ItemResult is one finished item.
type ItemResult struct {
	Item         string     `json:"item"`
	Child        string     `json:"child"`
	Error        string     `json:"error,omitempty"`
	Compensation []UndoCall `json:"compensation,omitempty"`
	// Undone is set on a completed item once its undo succeeded; an undo
	// that failed leaves Error ("undo: ...").
	Undone bool `json:"undone,omitempty"`
}

// RolloutResult is what a finished rollout returns (and its step's outputs).
type RolloutResult struct {
	Done    []string `json:"done"`
	Failed  []string `json:"failed"`
	Aborted bool     `json:"aborted"`
	// RestoreBy is who aborted it with a restore decision: the runbook
	// runs its restore steps after its undo.
	RestoreBy string `json:"restoreBy,omitempty"`
	// After an abort: the completed items whose undo succeeded, and those
	// whose undo failed (each "ITEM: why"). A completed item with nothing
	// to undo is in neither.
	Undone     []string `json:"undone,omitempty"`
	UndoFailed []string `json:"undoFailed,omitempty"`
	// Compensation undoes the completed rollout, newest item first, each
	// item's runbook newest step first: what a runbook that fails after
	// the rollout step runs (undoChange).
	Compensation []UndoCall `json:"compensation,omitempty"`
}

type rollout struct {
	in      RolloutInput
	st      *RolloutState
	running map[string]string // item -> child workflow ID
	order   []string          // running items in start order
	paused  bool
	// alertPause, when not empty, is why the alert gate paused the
	// rollout (its alerts held it past pauseAfter).
	alertPause string
	aborting   bool
	ui         ui
	exec       Execution // this run: decisions must name it
	// spend is what this run's renders of items' params may spend
	// (nil in runs started before the budget).
	spend *expr.Spend
	gate  gate
}

// Rollout runs a child runbook per item with at most MaxUnavailable at a
// time: a new item starts as soon as one finishes. When more than
// FailureBudget items have failed it stops starting items and pauses until
// an operator decides (update "decide"): continue, or abort, which undoes
// the items that completed. The last item failing past the budget pauses it
// too; when no item completed there is nothing to decide and it fails.
func Rollout(ctx workflow.Context, in RolloutInput) (RolloutResult, error) {
	if err := admitChild(ctx, "rollout", in.Runbook.Name == ""); err != nil {
		return RolloutResult{}, err
	}
	if in.MaxUnavailable < 1 {
		in.MaxUnavailable = 1
	}
	if in.ItemsPerRun < 1 {
		in.ItemsPerRun = DefaultItemsPerRun
	}
	if in.State.Runs == 0 {
		in.State.Budget = in.FailureBudget
	}
	in.State.Runs++
	firstOfRun := in.State.Next
	e := workflow.GetInfo(ctx).WorkflowExecution
	ro := &rollout{in: in, running: map[string]string{}, ui: newUI(ctx), exec: Execution{WorkflowID: e.ID, RunID: e.RunID}}
	ro.st = &ro.in.State
	if workflow.GetVersion(ctx, renderSpendChange, workflow.DefaultVersion, 1) == 1 {
		ro.spend = expr.NewSpend()
	}
	failsAtEnd := workflow.GetVersion(ctx, failedAtEndChange, workflow.DefaultVersion, 1) == 1
	decisions := workflow.NewBufferedChannel(ctx, 16)
	if err := workflow.SetQueryHandlerWithOptions(ctx, ProgressQuery, func() (Progress, error) { return ro.progress(), nil }, workflow.QueryHandlerOptions{
		Description: "every item: done, running, failed or pending, and whether the rollout is paused",
	}); err != nil {
		return RolloutResult{}, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, DecideUpdate, func(ctx workflow.Context, d Decision) (Decision, error) {
		d.At = workflow.Now(ctx)
		decisions.Send(ctx, d)
		return d, nil
	}, workflow.UpdateHandlerOptions{Validator: ro.validate, Description: "continue or abort a rollout paused at its failure budget"}); err != nil {
		return RolloutResult{}, err
	}
	ro.paused = len(ro.st.Failed) > ro.st.Budget
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(decisions, func(c workflow.ReceiveChannel, _ bool) {
		var d Decision
		c.Receive(ctx, &d)
		ro.decide(d)
	})
	ro.updateDetails(ctx)
	for {
		full := ro.st.Next-firstOfRun >= in.ItemsPerRun
		for !ro.paused && !ro.aborting && !full && len(ro.running) < in.MaxUnavailable && ro.st.Next < len(in.Items) {
			if open, pause, err := ro.gate.open(ctx, sel, &ro.in); err != nil {
				ro.ui.setStatus(ctx, searchattr.StatusFailed)
				return RolloutResult{Done: items(ro.st.Done), Failed: items(ro.st.Failed)}, err
			} else if pause != "" {
				ro.paused, ro.alertPause = true, pause
				break
			} else if !open {
				break
			}
			item := in.Items[ro.st.Next]
			ro.st.Next++
			ro.start(ctx, sel, item)
		}
		if len(ro.running) == 0 {
			if ro.aborting || (ro.st.Next >= len(in.Items) && (!ro.paused || !failsAtEnd)) {
				break
			}
			if ro.st.Next >= len(in.Items) && len(ro.st.Done) == 0 && !in.PauseWhenEveryItemFailed {
				// Every item that ran failed: nothing to accept or undo.
				ro.ui.setStatus(ctx, searchattr.StatusFailed)
				return ro.failed()
			}
			if full && !ro.paused {
				return RolloutResult{}, workflow.NewContinueAsNewError(ctx, RolloutWorkflow, ro.in)
			}
			// Held by its alerts for long, each question a few events:
			// a new run goes on holding, from the same HeldSince.
			if ro.in.Alerts != nil && ro.gate.holding != "" && !ro.paused && longHistory(ctx) {
				return RolloutResult{}, workflow.NewContinueAsNewError(ctx, RolloutWorkflow, ro.in)
			}
		}
		sel.Select(ctx)
		ro.updateDetails(ctx)
	}
	res := RolloutResult{Done: items(ro.st.Done), Failed: items(ro.st.Failed), Aborted: ro.aborting}
	if n := len(ro.st.Decisions); ro.aborting && n > 0 && ro.st.Decisions[n-1].Decision == DecisionRestore {
		res.RestoreBy = ro.st.Decisions[n-1].By
	}
	if ro.aborting {
		ro.compensate(ctx)
		ro.ui.setStatus(ctx, searchattr.StatusFailed)
		return res, ro.aborted(&res)
	}
	for i := len(ro.st.Done) - 1; i >= 0; i-- {
		res.Compensation = append(res.Compensation, ro.st.Done[i].Compensation...)
	}
	ro.ui.setStatus(ctx, searchattr.StatusSucceeded)
	return res, nil
}

// failedAtEndChange versions the end of a rollout whose failures are past
// its budget: before, it succeeded with them in its outputs; now it pauses
// for a decision like a rollout paused mid-way, or fails when no item
// completed.
const failedAtEndChange = "kedge-rollout-failed-at-end"

// failed is the error of a rollout in which every item that ran failed.
func (ro *rollout) failed() (RolloutResult, error) {
	res := RolloutResult{Failed: items(ro.st.Failed)}
	var why []string
	for _, f := range ro.st.Failed[:min(len(ro.st.Failed), 10)] {
		why = append(why, f.Item+": "+clip(f.Error, 400))
	}
	if n := len(ro.st.Failed) - len(why); n > 0 {
		why = append(why, fmt.Sprintf("and %d more", n))
	}
	msg := fmt.Sprintf("rollout %s: every item failed (%d): %s", ro.in.Step, len(ro.st.Failed), strings.Join(why, "; "))
	return res, temporal.NewNonRetryableApplicationError(msg, "RolloutFailed", nil, res)
}

// aborted is the error an aborted rollout ends with: what failed, who
// aborted, and exactly which undos succeeded and which did not (then the
// error type is RolloutUndoFailed: nodes are left as the failed undo
// left them).
func (ro *rollout) aborted(res *RolloutResult) error {
	var nothing []string
	for _, d := range ro.st.Done {
		switch {
		case d.Undone:
			res.Undone = append(res.Undone, d.Item)
		case d.Error != "":
			res.UndoFailed = append(res.UndoFailed, d.Item+": "+d.Error)
		default:
			nothing = append(nothing, d.Item)
		}
	}
	by := ""
	if n := len(ro.st.Decisions); n > 0 {
		by = " by " + ro.st.Decisions[n-1].By
	}
	var b strings.Builder
	printf(&b, "rollout %s aborted%s after %d failed (%s)", ro.in.Step, by, len(ro.st.Failed), strings.Join(res.Failed, ", "))
	if res.RestoreBy != "" {
		printf(&b, ", for a restore")
	}
	if len(res.Undone) > 0 {
		printf(&b, "; undone: %s", strings.Join(res.Undone, ", "))
	}
	if len(nothing) > 0 {
		printf(&b, "; nothing to undo: %s", strings.Join(nothing, ", "))
	}
	typ := "RolloutAborted"
	if len(res.UndoFailed) > 0 {
		printf(&b, "; UNDO FAILED on %d: %s", len(res.UndoFailed), strings.Join(res.UndoFailed, "; "))
		typ = "RolloutUndoFailed"
	}
	return temporal.NewNonRetryableApplicationError(b.String(), typ, nil, *res)
}

func items(rs []ItemResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Item
	}
	return out
}

// start launches the child runbook for one item.
func (ro *rollout) start(ctx workflow.Context, sel workflow.Selector, item string) {
	id := NodeWorkflowID(ro.in.Cluster.Name, item)
	ro.running[item] = id
	ro.order = append(ro.order, item)
	finish := func(res RunbookResult, err error) {
		delete(ro.running, item)
		for i, it := range ro.order {
			if it == item {
				ro.order = append(ro.order[:i], ro.order[i+1:]...)
				break
			}
		}
		r := ItemResult{Item: item, Child: id}
		if ro.in.Delay > 0 {
			ro.st.LastEnd = workflow.Now(ctx)
		}
		if err != nil {
			r.Error = errorMessage(err)
			ro.st.Failed = append(ro.st.Failed, r)
			if len(ro.st.Failed) > ro.st.Budget {
				ro.paused = true
			}
			return
		}
		r.Compensation = res.Compensation
		ro.st.Done = append(ro.st.Done, r)
	}
	pace(ctx, ro.spend)
	params, err := plan.ItemParams(&ro.in.Runbook, ro.in.With, expr.WithSpend(maps.Clone(ro.in.Vars), ro.spend), item, &ro.in.Cluster)
	if err != nil {
		f, set := workflow.NewFuture(ctx)
		set.SetError(temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err))
		sel.AddFuture(f, func(f workflow.Future) { finish(RunbookResult{}, f.Get(ctx, nil)) })
		return
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		StaticSummary:         fmt.Sprintf("%s on %s (%s, rollout step %s)", ro.in.Runbook.Name, item, ro.in.Cluster.Name, ro.in.Step),
		TypedSearchAttributes: ro.ui.childLabels(ro.in.Cluster.Name, ro.in.Runbook.Name, item),
	})
	f := workflow.ExecuteChildWorkflow(cctx, ro.ui.childType(ro.in.Runbook.Name), RunbookInput{
		Runbook: ro.in.Runbook, Children: ro.in.Children, Params: params, Cluster: ro.in.Cluster.Focus(item),
		Admission: childAdmission(ctx),
	})
	sel.AddFuture(f, func(f workflow.Future) {
		var res RunbookResult
		err := f.Get(ctx, &res)
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			err = temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("another runbook is working on %s (workflow %s)", item, id), errtype.NodeBusy, err)
		}
		finish(res, err)
	})
}

func (ro *rollout) validate(d Decision) error {
	if !ro.paused {
		return fmt.Errorf("rollout %s is not paused (%d failed, budget %d)", ro.in.Step, len(ro.st.Failed), ro.st.Budget)
	}
	switch {
	case d.Decision == DecisionContinue || d.Decision == DecisionAbort:
	case d.Decision == DecisionRestore && ro.in.Restore:
	case ro.in.Restore:
		return fmt.Errorf("decision must be %s, %s or %s, got %q", DecisionContinue, DecisionAbort, DecisionRestore, d.Decision)
	default:
		return fmt.Errorf("decision must be %s or %s, got %q (the runbook has no restore steps)", DecisionContinue, DecisionAbort, d.Decision)
	}
	if strings.TrimSpace(d.By) == "" {
		return fmt.Errorf("a decision must say who made it")
	}
	return checkBound(d, ro.exec, ro.pauseNonce())
}

// pauseNonce is this pause's: each pause of a rollout ends with one
// decision, so their count numbers the pauses.
func (ro *rollout) pauseNonce() string {
	return pauseNonce(ro.exec.RunID, fmt.Sprintf("pause/%d", len(ro.st.Decisions)))
}

// decide applies an operator's decision: continue tolerates as many new
// failures as the original budget; abort stops and undoes.
//
// A rollout its alert gate paused goes on holding on continue: no item
// starts while an alert of the set fires, and it pauses again after
// another pauseAfter.
func (ro *rollout) decide(d Decision) {
	if !ro.paused {
		return
	}
	d.Step = ro.in.Step
	ro.st.Decisions = append(ro.st.Decisions, d)
	ro.paused = false
	if d.Decision == DecisionAbort || d.Decision == DecisionRestore {
		ro.aborting = true
		return
	}
	if ro.alertPause != "" {
		ro.alertPause = ""
		ro.st.HeldSince = d.At
		ro.gate.holding = ""
	}
	if len(ro.st.Failed) > ro.st.Budget {
		ro.st.Budget = len(ro.st.Failed) + ro.in.FailureBudget
	}
}

// compensate undoes completed items, newest first, each under its node's
// workflow ID so nothing else works on the node meanwhile.
func (ro *rollout) compensate(ctx workflow.Context) {
	cctx, _ := workflow.NewDisconnectedContext(ctx)
	for i := len(ro.st.Done) - 1; i >= 0; i-- {
		d := &ro.st.Done[i]
		if len(d.Compensation) == 0 {
			continue
		}
		opts := workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
			WorkflowID:            NodeWorkflowID(ro.in.Cluster.Name, d.Item),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:         fmt.Sprintf("undo %s on %s", ro.in.Runbook.Name, d.Item),
		})
		if err := workflow.ExecuteChildWorkflow(opts, CompensateWorkflow, d.Compensation).Get(cctx, nil); err != nil {
			d.Error = "undo: " + errorMessage(err)
		} else {
			d.Undone = true
		}
	}
}

func (ro *rollout) updateDetails(ctx workflow.Context) {
	state := "running"
	status := searchattr.StatusRunning
	if ro.paused {
		choices := "continue|abort"
		if ro.in.Restore {
			choices += "|restore"
		}
		state = fmt.Sprintf("PAUSED: %d failed, over the budget of %d — kedge approve ID --decision %s", len(ro.st.Failed), ro.st.Budget, choices)
		if ro.alertPause != "" {
			state = fmt.Sprintf("PAUSED: %s — kedge approve ID --decision %s (continue: hold again until they clear)", ro.alertPause, choices)
		}
		status = searchattr.StatusPaused
	}
	// The items counted by state as every front end counts them
	// (CountStates over the items' progress).
	steps := ro.progress().Steps
	states := make([]string, len(steps))
	for i, s := range steps {
		states[i] = s.State
	}
	if w := ro.gate.waiting; w != "" && !ro.paused && len(ro.order) == 0 {
		state = w
	}
	var b strings.Builder
	printf(&b, "**%s** over %d items: %s — %s", ro.in.Runbook.Name, len(ro.in.Items), CountStates(states), state)
	if len(ro.order) > 0 {
		printf(&b, "\n\nrunning: %s", clip(strings.Join(ro.order, ", "), 400))
	}
	if n := len(ro.st.Failed); n > 0 {
		var failed []string
		for _, f := range ro.st.Failed[max(0, n-10):] {
			failed = append(failed, fmt.Sprintf("- ✗ %s: %s", f.Item, clip(f.Error, 200)))
		}
		printf(&b, "\n\nfailed:\n%s", strings.Join(failed, "\n"))
	}
	workflow.SetCurrentDetails(ctx, b.String())
	ro.ui.setStatus(ctx, status)
}

// progress shows every item as a step: done, running, failed or pending.
func (ro *rollout) progress() Progress {
	p := Progress{WorkflowID: ro.exec.WorkflowID, RunID: ro.exec.RunID, Runbook: ro.in.Runbook.Name, Cluster: ro.in.Cluster.Name, State: StateRunning}
	if ro.paused {
		p.State = StateWaiting
		p.Nonce = ro.pauseNonce()
		p.Restore = ro.in.Restore
		p.Error = fmt.Sprintf("paused: %d failed, budget %d", len(ro.st.Failed), ro.st.Budget)
		if ro.alertPause != "" {
			p.Error = "paused: " + ro.alertPause
		}
	}
	p.Waiting = ro.gate.waiting
	if ro.paused && ro.alertPause != "" {
		p.Waiting, p.AlertPause = ro.alertPause, len(ro.st.Decisions)+1
	}
	add := func(item, state, child, errText string) {
		p.Steps = append(p.Steps, StepProgress{ID: item, Kind: "runbook", State: state, Child: child, LastError: errText, Attempts: 1})
	}
	for _, d := range ro.st.Done {
		state := StateSucceeded
		switch {
		case d.Undone:
			state = StateUndone
		case d.Error != "":
			state = StateFailed // its undo failed
		}
		add(d.Item, state, d.Child, d.Error)
	}
	for _, f := range ro.st.Failed {
		add(f.Item, StateFailed, f.Child, f.Error)
	}
	for _, item := range ro.order {
		add(item, StateRunning, ro.running[item], "")
	}
	for _, item := range ro.in.Items[ro.st.Next:] {
		add(item, StatePending, "", "")
	}
	return p
}
