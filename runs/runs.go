package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// queryTimeout bounds one progress query: a run whose worker is gone does
// not hold a front end up.
const queryTimeout = 5 * time.Second

// Progress asks a runbook or rollout workflow for its progress (runID ""
// is the latest run), with the attempts Temporal is making of its
// running actions and their last failures (withPending), opened with o.
func Progress(ctx context.Context, cl client.Client, o Opener, id, runID string) (workflows.Progress, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	v, err := cl.QueryWorkflow(ctx, id, runID, workflows.ProgressQuery)
	if err != nil {
		return workflows.Progress{}, err
	}
	var p workflows.Progress
	if err = v.Get(&p); err != nil || p.State != workflows.StateRunning {
		return p, err
	}
	if d, err := cl.DescribeWorkflowExecution(ctx, id, runID); err == nil {
		withPending(&p, d.GetPendingActivities(), o.lastFailure(id))
	}
	return p, nil
}

// RootMessage is the message of err's innermost cause: what failed, without
// the layers of "workflow failed" / "activity failed" around it.
func RootMessage(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// Kinds of pause.
const (
	PauseRollout  = "rollout"  // a rollout over its failure budget: continue, abort (or restore)
	PauseApproval = "approval" // an approval step: approve or reject
	// PauseFleetLock: a node holding a FleetLock slot that waits for a
	// person (its drain failed, or it is not back): release its slot.
	PauseFleetLock = "fleetlock"
)

// Pause is something a run waits for a person to decide. Its JSON is
// short: chat buttons carry it.
type Pause struct {
	Kind   string `json:"k"`
	Target string `json:"t"` // the workflow the decision goes to
	Step   string `json:"s"` // the approval step, or the rollout's step
	// Seq tells pauses of one rollout apart: the number of failed items
	// when it paused, or, for a pause of its alert gate, minus that
	// pause's number. A button of an earlier pause never decides a later
	// one.
	Seq    int      `json:"q,omitempty"`
	Prompt string   `json:"-"` // the approval's prompt, or why the rollout paused
	Failed []string `json:"-"` // a paused rollout's failed items, "node: error"
	// Restore: the paused rollout also takes workflows.DecisionRestore.
	Restore bool `json:"-"`
	// Alerts: the rollout's alert gate paused it (its alerts held it
	// past pauseAfter), not its failure budget.
	Alerts bool `json:"-"`
}

// Same says whether two pauses are the same decision point.
func (p Pause) Same(o Pause) bool {
	return p.Kind == o.Kind && p.Target == o.Target && p.Step == o.Step && p.Seq == o.Seq
}

// maxDepth bounds how deep FindPauses follows child runbooks.
const maxDepth = 4

// FindPauses walks p, the progress of workflow id, and that of its running
// child runbooks and rollouts, for what waits on a person.
func FindPauses(ctx context.Context, cl client.Client, p workflows.Progress, id string) []Pause {
	return findPauses(ctx, cl, p, id, 0)
}

func findPauses(ctx context.Context, cl client.Client, p workflows.Progress, id string, depth int) []Pause {
	var out []Pause
	for _, st := range p.Steps {
		switch {
		case st.WaitsForApproval():
			out = append(out, Pause{Kind: PauseApproval, Target: id, Step: st.ID, Prompt: st.Prompt})
		case st.Child != "" && st.State == workflows.StateRunning && depth < maxDepth:
			cp, err := Progress(ctx, cl, Opener{}, st.Child, "")
			if err != nil {
				continue
			}
			if st.Kind == "rollout" {
				if cp.State == workflows.StateWaiting {
					out = append(out, rolloutPause(st, cp))
				}
				continue
			}
			out = append(out, findPauses(ctx, cl, cp, st.Child, depth+1)...)
		}
	}
	return out
}

func rolloutPause(st workflows.StepProgress, cp workflows.Progress) Pause {
	pa := Pause{Kind: PauseRollout, Target: st.Child, Step: st.ID, Prompt: cp.Error, Restore: cp.Restore}
	for _, it := range cp.Steps {
		if it.State == workflows.StateFailed {
			pa.Failed = append(pa.Failed, it.ID+": "+it.LastError)
		}
	}
	pa.Seq = len(pa.Failed)
	if cp.AlertPause > 0 {
		pa.Alerts, pa.Seq = true, -cp.AlertPause
	}
	return pa
}

// DecideAs sends the decision named (approve or reject for an approval,
// continue, abort or restore for a rollout) to the pause. It is bound to
// the pause as the workflow reports it now (BindDecision), so a decision
// meant for an earlier pause is refused. updateID ("" for a fresh one)
// makes a repeated request apply once.
func DecideAs(ctx context.Context, cl client.Client, p Pause, decision, by, comment, updateID string) (workflows.Decision, error) {
	d := workflows.Decision{By: by, Comment: comment, Decision: decision}
	name := workflows.DecideUpdate
	switch p.Kind {
	case PauseApproval:
		name = workflows.ApproveUpdate
		d.Step = p.Step
	case PauseFleetLock:
		d.Step = p.Step
	}
	cur, err := Progress(ctx, cl, Opener{}, p.Target, "")
	if err != nil {
		return d, fmt.Errorf("query %s: %w", p.Target, err)
	}
	if d, err = workflows.BindDecision(d, cur); err != nil {
		return d, err
	}
	h, err := cl.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     updateID,
		RunID:        d.RunID,
		WorkflowID:   p.Target,
		UpdateName:   name,
		WaitForStage: client.WorkflowUpdateStageCompleted,
		Args:         []any{d},
	})
	if err != nil {
		return d, err
	}
	var out workflows.Decision
	if err := h.Get(ctx, &out); err != nil {
		return d, err
	}
	return out, nil
}

// ExpandRollouts fills in the items of p's rollout steps, and whether each
// rollout is paused, from the rollout's own progress query (the runbook's
// query leaves them out). expanded (nil for none) holds the rollout steps
// that have ended and were read once since: they are not asked again.
func ExpandRollouts(ctx context.Context, cl client.Client, p *workflows.Progress, expanded map[string]bool) {
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Kind != "rollout" || s.Child == "" || s.State == workflows.StatePending || expanded[s.ID] {
			continue
		}
		rp, err := Progress(ctx, cl, Opener{}, s.Child, "")
		if err != nil {
			continue
		}
		s.Items, s.Paused, s.Waiting = rp.Steps, rp.State == workflows.StateWaiting, rp.Waiting
		if s.State != workflows.StateRunning && expanded != nil {
			expanded[s.ID] = true
		}
	}
}
