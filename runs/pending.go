package runs

import (
	workflowpb "go.temporal.io/api/workflow/v1"

	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/workflows"
)

// withPending fills in the attempts Temporal is making of a run's
// actions: the workflow sees an action's attempts only when the last one
// ends, while Temporal retries it (attempt.ID names the step and host of
// each pending activity). An attempt past the first says the
// ones before it failed or were lost.
func withPending(p *workflows.Progress, pending []*workflowpb.PendingActivityInfo) {
	for _, a := range pending {
		step, host, _, ok := attempt.ParseID(a.GetActivityId())
		n := int(a.GetAttempt())
		if !ok || n <= 1 {
			continue
		}
		for i := range p.Steps {
			s := &p.Steps[i]
			if s.ID != step || s.State != workflows.StateRunning {
				continue
			}
			s.Attempts = max(s.Attempts, n)
			for j := range s.Hosts {
				if h := &s.Hosts[j]; h.Name == host {
					h.Attempts = max(h.Attempts, n)
				}
			}
		}
	}
}
