package chatops

import (
	"context"

	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/workflows"
)

// topOf follows a workflow's parents to the runbook a person started.
func (s *Server) topOf(ctx context.Context, id string) (string, error) {
	for range 6 {
		ri, err := s.describe(ctx, id, "")
		if err != nil {
			if isNotFound(err) {
				return "", refuse(404, "no workflow %q", slackmsg.Clip(id))
			}
			return "", err
		}
		if ri.parent == "" {
			if !runs.IsRunbookType(ri.typeName) {
				return "", refuse(422, "%s is not a runbook (it is a %s workflow)", slackmsg.Clip(id), ri.typeName)
			}
			return id, nil
		}
		id = ri.parent
	}
	return "", refuse(422, "%s is nested too deep", slackmsg.Clip(id))
}

// choice is what a person says at a pause, whatever its kind: a slash
// command (approve, abort, restore) or a button (Continue, Abort,
// Restore).
type choice int

const (
	choiceProceed choice = iota // approve a step, continue a rollout
	choiceStop                  // reject a step, abort a rollout
	choiceRestore               // abort a rollout, then the runbook's restore steps
)

// verb is what the answer needs the config to grant.
func (a choice) verb() Verb {
	if a == choiceRestore {
		return VerbRestore
	}
	return VerbApprove
}

// decision is the workflow decision the answer sends to pause p.
func (a choice) decision(p runs.Pause) string {
	switch {
	case a == choiceRestore:
		return workflows.DecisionRestore
	case p.Kind == runs.PauseApproval && a == choiceProceed:
		return workflows.DecisionApprove
	case p.Kind == runs.PauseApproval:
		return workflows.DecisionReject
	case a == choiceProceed:
		return workflows.DecisionContinue
	}
	return workflows.DecisionAbort
}

// word is what the answer did at p, for messages.
func (a choice) word(p runs.Pause) string {
	switch a.decision(p) {
	case workflows.DecisionApprove:
		return "approved"
	case workflows.DecisionReject:
		return "rejected"
	case workflows.DecisionContinue:
		return "continued"
	case workflows.DecisionRestore:
		return "asked a restore at"
	}
	return "aborted"
}

func (a choice) icon() string {
	switch a {
	case choiceProceed:
		return ":arrow_forward:"
	case choiceRestore:
		return ":rewind:"
	}
	return ":octagonal_sign:"
}

// offered refuses an answer the pause does not take: restore at an
// approval or at a rollout whose runbook has no restore steps.
func (a choice) offered(p runs.Pause) error {
	if a == choiceRestore && !p.Restore {
		return refuse(409, "%s (%s) offers no restore: only runbooks with restore steps do, at a rollout's pause", slackmsg.Clip(p.Target), slackmsg.Clip(p.Step))
	}
	return nil
}
