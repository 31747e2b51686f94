package chatops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// Kinds of pause.
const (
	PauseRollout  = "rollout"  // a rollout over its failure budget: continue or abort
	PauseApproval = "approval" // an approval step: approve or reject
)

// Pause is something a run waits for a person to decide.
type Pause struct {
	Kind   string `json:"k"`
	Target string `json:"t"` // the workflow the decision goes to
	Step   string `json:"s"` // the approval step, or the rollout's step
	// Seq tells pauses of one rollout apart: the number of failed items
	// when it paused. A button of an earlier pause never decides a later one.
	Seq    int      `json:"q,omitempty"`
	Prompt string   `json:"-"` // the approval's prompt, or why the rollout paused
	Failed []string `json:"-"` // a paused rollout's failed items, "node: error"
}

func (p Pause) same(o Pause) bool {
	return p.Kind == o.Kind && p.Target == o.Target && p.Step == o.Step && p.Seq == o.Seq
}

// queryProgress asks a runbook or rollout workflow for its progress.
func queryProgress(ctx context.Context, cl client.Client, id, runID string) (workflows.Progress, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := cl.QueryWorkflow(ctx, id, runID, workflows.ProgressQuery)
	if err != nil {
		return workflows.Progress{}, err
	}
	var p workflows.Progress
	err = v.Get(&p)
	return p, err
}

// findPauses walks a run's progress, and that of its running child
// runbooks and rollouts, for what waits on a person.
func findPauses(ctx context.Context, cl client.Client, p workflows.Progress, id string, depth int) []Pause {
	var out []Pause
	for _, st := range p.Steps {
		switch {
		case st.Kind == "approval" && st.State == workflows.StateWaiting:
			out = append(out, Pause{Kind: PauseApproval, Target: id, Step: st.ID, Prompt: st.Prompt})
		case st.Child != "" && st.State == workflows.StateRunning && depth < 3:
			cp, err := queryProgress(ctx, cl, st.Child, "")
			if err != nil {
				continue
			}
			if st.Kind == "rollout" {
				if cp.State == workflows.StateWaiting {
					pa := Pause{Kind: PauseRollout, Target: st.Child, Step: st.ID, Prompt: cp.Error}
					for _, it := range cp.Steps {
						if it.State == workflows.StateFailed {
							pa.Failed = append(pa.Failed, it.ID+": "+it.LastError)
						}
					}
					pa.Seq = len(pa.Failed)
					out = append(out, pa)
				}
				continue
			}
			out = append(out, findPauses(ctx, cl, cp, st.Child, depth+1)...)
		}
	}
	return out
}

// pausesKey identifies a set of pauses (the follower posts when it changes).
func pausesKey(ps []Pause) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s|%s|%s|%d", p.Kind, p.Target, p.Step, p.Seq))
	}
	return strings.Join(parts, ";")
}

// topOf follows a workflow's parents to the runbook a person started.
func (s *Server) topOf(ctx context.Context, id string) (string, error) {
	for range 6 {
		ri, err := s.describe(ctx, id, "")
		if err != nil {
			if isNotFound(err) {
				return "", refuse(404, "no workflow %q", clip(id))
			}
			return "", err
		}
		if ri.parent == "" {
			if !isRunbookType(ri.typeName) {
				return "", refuse(422, "%s is not a runbook (it is a %s workflow)", clip(id), ri.typeName)
			}
			return id, nil
		}
		id = ri.parent
	}
	return "", refuse(422, "%s is nested too deep", clip(id))
}

// decide sends a decision at a pause through the same updates as
// `kedge approve`: continue/abort to a rollout, approve/reject to an
// approval step. updateID makes a repeated request apply once.
func decide(ctx context.Context, cl client.Client, p Pause, proceed bool, by, comment, updateID string) (workflows.Decision, error) {
	d := workflows.Decision{By: by, Comment: comment}
	name := workflows.DecideUpdate
	if p.Kind == PauseApproval {
		name = workflows.ApproveUpdate
		d.Step = p.Step
		d.Decision = workflows.DecisionReject
		if proceed {
			d.Decision = workflows.DecisionApprove
		}
	} else {
		d.Decision = workflows.DecisionAbort
		if proceed {
			d.Decision = workflows.DecisionContinue
		}
	}
	// Bound to the pause as it is now: the caller has checked it is the
	// pause the person saw.
	cur, err := queryProgress(ctx, cl, p.Target, "")
	if err != nil {
		return d, err
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

// decisionWord is what a decision did, for messages.
func decisionWord(p Pause, proceed bool) string {
	switch {
	case p.Kind == PauseApproval && proceed:
		return "approved"
	case p.Kind == PauseApproval:
		return "rejected"
	case proceed:
		return "continued"
	}
	return "aborted"
}

// rolloutItems asks each rollout step's workflow for its items.
func rolloutItems(ctx context.Context, cl client.Client, p workflows.Progress) map[string][]workflows.StepProgress {
	out := map[string][]workflows.StepProgress{}
	for _, st := range p.Steps {
		if st.Kind != "rollout" || st.Child == "" || st.State == workflows.StatePending {
			continue
		}
		if cp, err := queryProgress(ctx, cl, st.Child, ""); err == nil {
			out[st.ID] = cp.Steps
		}
	}
	return out
}
