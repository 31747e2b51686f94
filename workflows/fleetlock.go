package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
)

// The FleetLock coordinator: one long-running workflow per cluster that
// decides which self-updating nodes (Zincati's FleetLock client) may
// reboot. The webhook server asks it through two updates, one per
// protocol call.
const (
	FleetLockWorkflow          = "fleetlock"
	FleetLockPreRebootUpdate   = "fleetlock.pre-reboot"
	FleetLockSteadyStateUpdate = "fleetlock.steady-state"
	// FleetLockDecisionRelease frees the slot of a node that never came
	// back, or whose drain failed (decide update, Step = the node).
	FleetLockDecisionRelease = "release"
)

// fleetLockReleaseUncordons versions the release of a lost node: the
// coordinator runs its Release runbook on the node (Ready, uncordon)
// after it frees the slot.
const fleetLockReleaseUncordons = "kedge-fleetlock-release-uncordons"

// DefaultFleetLockLostAfter is how long a node granted its reboot may
// take to report steady-state before it is taken for lost.
const DefaultFleetLockLostAfter = 30 * time.Minute

// FleetLockWorkflowID is the coordinator of a cluster.
func FleetLockWorkflowID(cluster string) string { return "fleetlock/" + cluster }

// Phases of a node holding a FleetLock slot.
const (
	LockDraining    = "draining"     // cordon and drain running
	LockDrained     = "drained"      // may reboot: granted on its next ask
	LockDrainFailed = "drain-failed" // not drained: waits for a person
	LockRebooting   = "rebooting"    // granted, not back yet
	LockLost        = "lost"         // granted and not back in time: waits for a person
	LockReleasing   = "releasing"    // back: Ready, uncordon
)

// FleetLockInput is a cluster's coordinator.
type FleetLockInput struct {
	Cluster inventory.Cluster `json:"cluster"`
	// Drain cordons and drains one node (param node); Release waits for
	// it to be Ready and uncordons it.
	Drain   runbooks.Runbook `json:"drain"`
	Release runbooks.Runbook `json:"release"`
	// Slots is how many nodes may be out at once (at least 1).
	Slots int `json:"slots"`
	// Window, when set, is when a slot may be taken.
	Window    *window.Spec  `json:"window,omitempty"`
	LostAfter time.Duration `json:"lostAfter,omitempty"`
	// DrainTimeout is the Drain runbook's param drainTimeout; 0 leaves
	// the runbook's default.
	DrainTimeout time.Duration `json:"drainTimeout,omitempty"`
	// IssuedAt is when the front door sealed the first run's input.
	IssuedAt time.Time      `json:"issuedAt,omitzero"`
	State    FleetLockState `json:"state"`
}

// FleetLockState is what the coordinator carries across continue-as-new.
type FleetLockState struct {
	Holders []FleetLockHolder `json:"holders,omitempty"`
	// Log is the last decisions, newest last (at most 50).
	Log []string `json:"log,omitempty"`
}

// FleetLockHolder is a node holding a slot.
type FleetLockHolder struct {
	Node     string    `json:"node"`
	ClientID string    `json:"clientId"`
	Group    string    `json:"group"`
	Phase    string    `json:"phase"`
	Since    time.Time `json:"since"`
	Child    string    `json:"child,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// FleetLockRequest is one protocol call for a node of the inventory.
type FleetLockRequest struct {
	Node     string `json:"node"`
	ClientID string `json:"clientId"`
	Group    string `json:"group"`
}

// FleetLockAnswer is the coordinator's answer: granted, or why not yet.
type FleetLockAnswer struct {
	Granted bool   `json:"granted"`
	Reason  string `json:"reason,omitempty"`
}

type fleetLock struct {
	in   *FleetLockInput
	st   *FleetLockState
	gate gate
	ui   ui
	exec Execution
	busy int // children and timers running
}

// FleetLock coordinates a cluster's self-updating nodes: a node asking to
// reboot (pre-reboot) takes a free slot, if the window is open, and is
// cordoned and drained by a child runbook; once drained, its next ask is
// granted. A drain that fails keeps the slot and waits for a person.
// When the node reports steady-state after its reboot, it is uncordoned
// once Ready and its slot is free. A node granted its reboot that does
// not report back within LostAfter keeps its slot: the coordinator shows
// itself paused until an operator releases the slot (decide update,
// decision "release", step = the node).
func FleetLock(ctx workflow.Context, in FleetLockInput) error {
	refuseReset(ctx)
	info := workflow.GetInfo(ctx)
	if info.ContinuedExecutionRunID == "" {
		if in.IssuedAt.IsZero() {
			return notAdmitted("its input carries no admission")
		}
		if d := info.WorkflowStartTime.Sub(in.IssuedAt); d > AdmissionWindow || d < -AdmissionWindow {
			return notAdmitted("its input was sealed at %s, %s from its start", in.IssuedAt.Format(time.RFC3339), d.Round(time.Second))
		}
	}
	if in.Slots < 1 {
		in.Slots = 1
	}
	if in.LostAfter <= 0 {
		in.LostAfter = DefaultFleetLockLostAfter
	}
	fl := &fleetLock{in: &in, st: &in.State, ui: newUI(ctx), exec: Execution{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}}
	if err := fl.handlers(ctx); err != nil {
		return err
	}
	for i := range fl.st.Holders {
		if fl.st.Holders[i].Phase == LockRebooting {
			fl.watch(ctx, fl.st.Holders[i].Node, fl.st.Holders[i].Since)
		}
	}
	fl.show(ctx)
	// Continue as new once the history is long and nothing is under way.
	if err := workflow.Await(ctx, func() bool {
		return workflow.GetInfo(ctx).GetCurrentHistoryLength() > 4000 && fl.busy == 0 && !fl.moving()
	}); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, FleetLockWorkflow, *fl.in)
}

// moving says whether a holder is in a phase a child is working on.
func (fl *fleetLock) moving() bool {
	return slices.ContainsFunc(fl.st.Holders, func(h FleetLockHolder) bool {
		return h.Phase == LockDraining || h.Phase == LockReleasing
	})
}

func (fl *fleetLock) handlers(ctx workflow.Context) error {
	known := func(r FleetLockRequest) error {
		n, ok := fl.in.Cluster.Node(r.Node)
		if !ok {
			return fmt.Errorf("cluster %s has no node %q", fl.in.Cluster.Name, r.Node)
		}
		if n.FleetLockID == "" || n.FleetLockID != r.ClientID {
			return fmt.Errorf("node %s: the client ID is not the inventory's fleetLockId", r.Node)
		}
		return nil
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, FleetLockPreRebootUpdate, func(ctx workflow.Context, r FleetLockRequest) (FleetLockAnswer, error) {
		a := fl.preReboot(ctx, r)
		fl.note(ctx, r.Node, "pre-reboot", a)
		return a, nil
	}, workflow.UpdateHandlerOptions{Validator: known, Description: "a node asks to reboot (FleetLock pre-reboot)"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, FleetLockSteadyStateUpdate, func(ctx workflow.Context, r FleetLockRequest) (FleetLockAnswer, error) {
		a := fl.steadyState(ctx, r)
		fl.note(ctx, r.Node, "steady-state", a)
		return a, nil
	}, workflow.UpdateHandlerOptions{Validator: known, Description: "a node is up and steady (FleetLock steady-state)"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, DecideUpdate, func(ctx workflow.Context, d Decision) (Decision, error) {
		d.At = workflow.Now(ctx)
		h := fl.holder(d.Step)
		lost := h != nil && h.Phase == LockLost
		fl.release(d.Step)
		line := fmt.Sprintf("%s %s: slot released by %s", d.At.UTC().Format(time.RFC3339), d.Step, d.By)
		// A lost node was cordoned and drained: it is uncordoned once it
		// is Ready (a drain that failed was undone by its runbook).
		if lost && workflow.GetVersion(ctx, fleetLockReleaseUncordons, workflow.DefaultVersion, 1) == 1 {
			line += "; uncordoned once Ready (" + fl.in.Release.Name + ")"
			node := d.Step
			fl.runOn(ctx, node, fl.in.Release, map[string]any{"node": node}, func(err error) {
				outcome := "uncordoned after its release"
				if err != nil {
					outcome = "stays cordoned after its release (" + clip(errorMessage(err), 200) + "): kubectl uncordon " + node + " once it is back"
				}
				fl.st.Log = appendLog(fl.st.Log, fmt.Sprintf("%s %s: %s", workflow.Now(ctx).UTC().Format(time.RFC3339), node, outcome))
			})
		}
		fl.st.Log = appendLog(fl.st.Log, line)
		fl.show(ctx)
		return d, nil
	}, workflow.UpdateHandlerOptions{Validator: fl.validateRelease, Description: "release the slot of a node that never came back or whose drain failed"}); err != nil {
		return err
	}
	return workflow.SetQueryHandlerWithOptions(ctx, ProgressQuery, func() (Progress, error) { return fl.progress(), nil },
		workflow.QueryHandlerOptions{Description: "the nodes holding a slot and their phase"})
}

func (fl *fleetLock) holder(node string) *FleetLockHolder {
	for i := range fl.st.Holders {
		if fl.st.Holders[i].Node == node {
			return &fl.st.Holders[i]
		}
	}
	return nil
}

func (fl *fleetLock) release(node string) {
	fl.st.Holders = slices.DeleteFunc(fl.st.Holders, func(h FleetLockHolder) bool { return h.Node == node })
}

func (fl *fleetLock) validateRelease(d Decision) error {
	if d.Decision != FleetLockDecisionRelease {
		return fmt.Errorf("the FleetLock coordinator takes decision %q (with the node as its step), not %q", FleetLockDecisionRelease, d.Decision)
	}
	if d.WorkflowID != fl.exec.WorkflowID {
		return fmt.Errorf("the decision is for %q, not the coordinator %q: query its progress and decide again", d.WorkflowID, fl.exec.WorkflowID)
	}
	h := fl.holder(d.Step)
	if h == nil || (h.Phase != LockLost && h.Phase != LockDrainFailed) {
		return fmt.Errorf("node %q holds no slot waiting for a person", d.Step)
	}
	if d.Nonce != h.nonce() {
		return fmt.Errorf("node %s: the decision was made for another wait than its current one (%s since %s): look again", d.Step, h.Phase, h.Since.UTC().Format(time.RFC3339))
	}
	return nil
}

// nonce names the holder's current wait for a person: a release must
// carry it, so a decision made for an earlier wait is refused.
func (h *FleetLockHolder) nonce() string {
	return fmt.Sprintf("%s/%d", h.Phase, h.Since.UnixNano())
}

func (fl *fleetLock) preReboot(ctx workflow.Context, r FleetLockRequest) FleetLockAnswer {
	if h := fl.holder(r.Node); h != nil {
		switch h.Phase {
		case LockDrained, LockRebooting:
			if h.Phase == LockDrained {
				h.Phase, h.Since = LockRebooting, workflow.Now(ctx)
				fl.watch(ctx, h.Node, h.Since)
			}
			return FleetLockAnswer{Granted: true, Reason: "cordoned and drained: reboot"}
		case LockDraining:
			return FleetLockAnswer{Reason: "being cordoned and drained"}
		case LockDrainFailed:
			return FleetLockAnswer{Reason: "its drain failed (" + clip(h.Error, 200) + "): it is not rebooted; an operator decides (kedge approve " + fl.exec.WorkflowID + " --step " + h.Node + " --decision release)"}
		default:
			return FleetLockAnswer{Reason: "its last reboot is not finished (" + h.Phase + ")"}
		}
	}
	if fl.in.Window != nil {
		if st := fl.gate.window(ctx, *fl.in.Window, workflow.Now(ctx)); !st.Open {
			return FleetLockAnswer{Reason: "outside the maintenance window: " + st.Describe(workflow.Now(ctx))}
		}
	}
	if len(fl.st.Holders) >= fl.in.Slots {
		var held []string
		for _, h := range fl.st.Holders {
			held = append(held, h.Node+" ("+h.Phase+")")
		}
		return FleetLockAnswer{Reason: fmt.Sprintf("all %d slots are held: %s", fl.in.Slots, strings.Join(held, ", "))}
	}
	fl.st.Holders = append(fl.st.Holders, FleetLockHolder{Node: r.Node, ClientID: r.ClientID, Group: r.Group, Phase: LockDraining, Since: workflow.Now(ctx)})
	params := map[string]any{"node": r.Node}
	if fl.in.DrainTimeout > 0 {
		params["drainTimeout"] = fl.in.DrainTimeout.String()
	}
	fl.child(ctx, r.Node, fl.in.Drain, params, func(h *FleetLockHolder, err error) {
		if err != nil {
			h.Phase, h.Error, h.Since = LockDrainFailed, errorMessage(err), workflow.Now(ctx)
			return
		}
		h.Phase = LockDrained
	})
	return FleetLockAnswer{Reason: "slot taken: being cordoned and drained"}
}

func (fl *fleetLock) steadyState(ctx workflow.Context, r FleetLockRequest) FleetLockAnswer {
	h := fl.holder(r.Node)
	if h == nil {
		return FleetLockAnswer{Granted: true, Reason: "holds no slot"}
	}
	switch h.Phase {
	case LockRebooting, LockLost, LockDrainFailed, LockDrained:
		h.Phase, h.Since = LockReleasing, workflow.Now(ctx)
		fl.child(ctx, r.Node, fl.in.Release, map[string]any{"node": r.Node}, func(h *FleetLockHolder, err error) {
			if err != nil {
				h.Phase, h.Error = LockLost, "uncordon after the reboot: "+errorMessage(err)
				return
			}
			fl.release(h.Node)
		})
		return FleetLockAnswer{Reason: "back: waiting for Ready to uncordon"}
	case LockReleasing:
		return FleetLockAnswer{Reason: "back: waiting for Ready to uncordon"}
	}
	return FleetLockAnswer{Reason: "being cordoned and drained"}
}

// child runs rb on node as a child runbook (given its params), then
// done with the node's holder (if it still holds a slot).
func (fl *fleetLock) child(ctx workflow.Context, node string, rb runbooks.Runbook, given map[string]any, done func(*FleetLockHolder, error)) {
	fl.holder(node).Child = NodeWorkflowID(fl.in.Cluster.Name, node)
	fl.runOn(ctx, node, rb, given, func(err error) {
		if h := fl.holder(node); h != nil {
			done(h, err)
		}
	})
}

// runOn runs rb on node as a child runbook (given its params), then done.
func (fl *fleetLock) runOn(ctx workflow.Context, node string, rb runbooks.Runbook, given map[string]any, done func(error)) {
	id := NodeWorkflowID(fl.in.Cluster.Name, node)
	fl.busy++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { fl.busy--; fl.show(ctx) }()
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            id,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			StaticSummary:         fmt.Sprintf("%s on %s (%s, FleetLock)", rb.Name, node, fl.in.Cluster.Name),
			TypedSearchAttributes: fl.ui.childLabels(fl.in.Cluster.Name, rb.Name, node),
		})
		focus := fl.in.Cluster.Focus(node)
		params, err := runbooks.ResolveParams(&rb, given, &focus)
		if err == nil {
			err = workflow.ExecuteChildWorkflow(cctx, fl.ui.childType(rb.Name), RunbookInput{
				Runbook: rb, Params: params, Cluster: focus, Admission: childAdmission(ctx),
			}).Get(ctx, nil)
		}
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			err = fmt.Errorf("another runbook is working on %s (workflow %s)", node, id)
		}
		done(err)
	})
	fl.show(ctx)
}

// watch takes a node granted its reboot at since for lost when it has not
// reported steady-state LostAfter later.
func (fl *fleetLock) watch(ctx workflow.Context, node string, since time.Time) {
	fl.busy++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { fl.busy-- }()
		if d := since.Add(fl.in.LostAfter).Sub(workflow.Now(ctx)); d > 0 {
			_ = workflow.Sleep(ctx, d)
		}
		if h := fl.holder(node); h != nil && h.Phase == LockRebooting && h.Since.Equal(since) {
			h.Phase, h.Error = LockLost, fmt.Sprintf("granted its reboot at %s and not back within %s", since.UTC().Format(time.RFC3339), fl.in.LostAfter)
			fl.show(ctx)
		}
	})
}

func (fl *fleetLock) note(ctx workflow.Context, node, call string, a FleetLockAnswer) {
	outcome := "wait: " + a.Reason
	if a.Granted {
		outcome = "granted"
	}
	fl.st.Log = appendLog(fl.st.Log, fmt.Sprintf("%s %s %s: %s", workflow.Now(ctx).UTC().Format(time.RFC3339), node, call, outcome))
	fl.show(ctx)
}

func appendLog(log []string, line string) []string {
	log = append(log, line)
	return log[max(0, len(log)-50):]
}

// show sets the coordinator's details and status for the Web UI: paused
// while a node waits for a person.
func (fl *fleetLock) show(ctx workflow.Context) {
	status := searchattr.StatusRunning
	var b strings.Builder
	printf(&b, "**FleetLock** for %s: %d of %d slots held", fl.in.Cluster.Name, len(fl.st.Holders), fl.in.Slots)
	for _, h := range fl.st.Holders {
		printf(&b, "\n- %s: %s since %s", h.Node, h.Phase, h.Since.UTC().Format(time.RFC3339))
		if h.Phase == LockLost || h.Phase == LockDrainFailed {
			status = searchattr.StatusPaused
			printf(&b, " — %s; kedge approve %s --step %s --decision release", clip(h.Error, 200), fl.exec.WorkflowID, h.Node)
		}
	}
	workflow.SetCurrentDetails(ctx, b.String())
	fl.ui.setStatus(ctx, status)
}

func (fl *fleetLock) progress() Progress {
	p := Progress{WorkflowID: fl.exec.WorkflowID, RunID: fl.exec.RunID, Runbook: FleetLockWorkflow, Cluster: fl.in.Cluster.Name, State: StateRunning}
	for _, h := range fl.st.Holders {
		state := StateRunning
		nonce := ""
		if h.Phase == LockLost || h.Phase == LockDrainFailed {
			state, p.State, nonce = StateWaiting, StateWaiting, h.nonce()
		}
		since := h.Since
		p.Steps = append(p.Steps, StepProgress{ID: h.Node, Kind: "fleetlock", Action: h.Phase, State: state, Child: h.Child, LastError: h.Error, StartedAt: &since, Attempts: 1, Nonce: nonce})
	}
	return p
}
