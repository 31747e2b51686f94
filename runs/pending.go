package runs

import (
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/workflows"
)

// Opener opens what a front end reads of its runs' pending activities
// (their last failures, sealed by the payload codec): the namespace and
// the data converter its client was made with. The zero Opener reads
// attempts only.
type Opener struct {
	Namespace     string
	DataConverter converter.DataConverter
}

// lastFailure returns what says why a pending activity of workflow id
// failed last ("" when it did not, or it does not open).
func (o Opener) lastFailure(id string) func(*workflowpb.PendingActivityInfo) string {
	return func(a *workflowpb.PendingActivityInfo) string {
		f := a.GetLastFailure()
		if f == nil || o.DataConverter == nil {
			return ""
		}
		dc := converter.WithDataConverterSerializationContext(o.DataConverter, converter.ActivitySerializationContext{
			Namespace: o.Namespace, WorkflowID: id, ActivityType: a.GetActivityType().GetName(),
			TaskQueue: a.GetActivityOptions().GetTaskQueue().GetName(),
		})
		fc := temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
		return fc.FailureToError(f).Error()
	}
}

// withPending fills in the attempts Temporal is making of a run's
// actions, and why the last one failed: the workflow sees an action's
// attempts only when the last one ends, while Temporal retries it
// (attempt.ID names the step and host of each pending activity). An
// attempt past the first says the ones before it failed or were lost.
func withPending(p *workflows.Progress, pending []*workflowpb.PendingActivityInfo, failure func(*workflowpb.PendingActivityInfo) string) {
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
			why := failure(a)
			if why != "" {
				s.LastError = why
				if host != "" {
					s.LastError = host + ": " + why
				}
			}
			for j := range s.Hosts {
				if h := &s.Hosts[j]; h.Name == host {
					h.Attempts = max(h.Attempts, n)
					if why != "" {
						h.LastError = why
					}
				}
			}
		}
	}
}
