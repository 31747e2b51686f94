package kubeapi

import (
	"context"
	"time"

	"kedge.dev/kedge/internal/resume"

	"kedge.dev/kedge/actions/kube"
)

// drainProgress is kube.drain's heartbeat: when the drain began and the
// pods it has evicted. A drain that resumes from it keeps the pods in its
// result and ends by the first one's deadline.
type drainProgress struct {
	StartedAt time.Time `json:"startedAt"`
	Evicted   []string  `json:"evicted"`
}

// waitProgress is kube.wait-node's heartbeat: when the wait began, so a
// wait resumed from it keeps its deadline, and what it saw last.
type waitProgress struct {
	StartedAt time.Time           `json:"startedAt"`
	Last      kube.WaitNodeResult `json:"last"`
}

// resumeDrain returns the progress of a drain a lost attempt began, or
// a new one begun now.
func resumeDrain(ctx context.Context) (drainProgress, bool) {
	var p drainProgress
	if !resume.Load(ctx, &p) {
		p = drainProgress{}
	}
	at, ok := resume.Began(p.StartedAt, time.Now())
	if !ok {
		return drainProgress{StartedAt: at}, false
	}
	return p, true
}

// minLastLook is the time a drain resumed past its deadline still gets:
// one look at the node, which succeeds when nothing is left to evict.
const minLastLook = 2 * time.Second

// remaining is what is left of timeout for a drain begun at start.
func remaining(start time.Time, timeout time.Duration) time.Duration {
	return max(timeout-time.Since(start), minLastLook)
}
