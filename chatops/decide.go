package chatops

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/internal/runs"
	"kedge.dev/kedge/workflows"
)

// pausesKey identifies a set of pauses (the follower posts when it changes).
func pausesKey(ps []runs.Pause) string {
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

// decisionWord is what a decision did, for messages.
func decisionWord(p runs.Pause, proceed bool) string {
	switch {
	case p.Kind == runs.PauseApproval && proceed:
		return "approved"
	case p.Kind == runs.PauseApproval:
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
		if cp, err := runs.Progress(ctx, cl, st.Child, ""); err == nil {
			out[st.ID] = cp.Steps
		}
	}
	return out
}
