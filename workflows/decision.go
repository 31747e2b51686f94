package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// pauseNonce names one pause of one run: the run ID and what pauses
// (an approval step, or a rollout's Nth pause). It need not be secret —
// the decision that carries it is sealed and bound to the run, and only
// key holders can read the progress query that shows it — only never the
// same for two pauses.
func pauseNonce(runID, what string) string {
	sum := sha256.Sum256([]byte(runID + "\x00" + what))
	return hex.EncodeToString(sum[:12])
}

// checkBound refuses a decision made for another run or another pause.
func checkBound(d Decision, exec Execution, nonce string) error {
	if d.WorkflowID != exec.WorkflowID || d.RunID != exec.RunID {
		return fmt.Errorf("the decision is for run %q of %q, not run %q of %q: query the run's progress and decide again",
			d.RunID, d.WorkflowID, exec.RunID, exec.WorkflowID)
	}
	if d.Nonce != nonce {
		return errors.New("the decision answers another pause (its nonce is not this pause's): query the run's progress and decide again")
	}
	return nil
}

// BindDecision fills in what ties d to the pause it answers, from the
// progress of the workflow that waits (the rollout, or the runbook with
// the approval step d.Step).
func BindDecision(d Decision, p Progress) (Decision, error) {
	if p.RunID == "" {
		return d, fmt.Errorf("%s answers progress without its run ID: is its worker older than this client?", p.WorkflowID)
	}
	d.WorkflowID, d.RunID = p.WorkflowID, p.RunID
	if d.Step == "" || d.Decision == DecisionContinue || d.Decision == DecisionAbort || d.Decision == DecisionRestore {
		if p.Nonce == "" {
			return d, fmt.Errorf("%s is not paused", p.WorkflowID)
		}
		d.Nonce = p.Nonce
		return d, nil
	}
	for _, s := range p.Steps {
		if s.ID == d.Step {
			if s.State != StateWaiting || s.Nonce == "" {
				return d, fmt.Errorf("step %s of %s is %s, not waiting for approval", s.ID, p.WorkflowID, s.State)
			}
			d.Nonce = s.Nonce
			return d, nil
		}
	}
	return d, fmt.Errorf("%s has no step %q", p.WorkflowID, d.Step)
}
