package chatops

import (
	"context"

	"kedge.dev/kedge/activities/chat"
	"kedge.dev/kedge/internal/runs"
)

// topOf follows a workflow's parents to the runbook a person started.
func (s *Server) topOf(ctx context.Context, id string) (string, error) {
	for range 6 {
		ri, err := s.describe(ctx, id, "")
		if err != nil {
			if isNotFound(err) {
				return "", refuse(404, "no workflow %q", chat.Clip(id))
			}
			return "", err
		}
		if ri.parent == "" {
			if !runs.IsRunbookType(ri.typeName) {
				return "", refuse(422, "%s is not a runbook (it is a %s workflow)", chat.Clip(id), ri.typeName)
			}
			return id, nil
		}
		id = ri.parent
	}
	return "", refuse(422, "%s is nested too deep", chat.Clip(id))
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
