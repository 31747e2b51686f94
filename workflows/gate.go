package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/prometheus"
	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks/plan"
)

// gate decides when a rollout may start its next item: while its window
// is open, once its delay since the last item's end has passed, and while
// no alert of its alert gate fires. When it may not, it arms one durable
// timer for the moment it may (or should ask Prometheus again), so the
// rollout's selector wakes then, and says why in waiting.
type gate struct {
	// known is the window's state until known.Until: an open window
	// stays open, a closed one closed, until then, so the window is
	// computed (in a side effect: time zones are data read from the
	// worker's disk) once per opening and once per closing, not per item.
	known   *window.State
	timerAt time.Time // the moment the armed timer fires
	waiting string
	// The alert gate: when it last asked Prometheus, and why the answer
	// holds the rollout ("": it does not).
	checkedAt time.Time
	holding   string
	asked     int // questions asked in this run (their activity IDs)
}

// open says whether an item may start now. pause, when not empty, is why
// the rollout must pause for a decision instead: its alerts held it for
// in.Alerts.PauseAfter.
func (g *gate) open(ctx workflow.Context, sel workflow.Selector, in *RolloutInput) (ok bool, pause string, err error) {
	if in.Window == nil && in.Delay <= 0 && in.Alerts == nil {
		return true, "", nil
	}
	now := workflow.Now(ctx)
	g.waiting = ""
	var until time.Time
	if lastEnd := in.State.LastEnd; in.Delay > 0 && !lastEnd.IsZero() && now.Before(lastEnd.Add(in.Delay)) {
		until = lastEnd.Add(in.Delay)
		g.waiting = fmt.Sprintf("waiting %s between items: the next starts at %s", in.Delay, until.UTC().Format("15:04:05 UTC"))
	}
	if until.IsZero() && in.Window != nil {
		st := g.window(ctx, *in.Window, now)
		if !st.Open {
			if st.Until.IsZero() {
				return false, "", temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("the rollout's window %q never opens again", in.Window.Schedule), "WindowNeverOpens", nil)
			}
			until = st.Until
			g.waiting = st.Describe(now)
		}
	}
	if until.IsZero() && in.Alerts != nil {
		if until, pause = g.alerts(ctx, in); pause != "" {
			return false, pause, nil
		}
		now = workflow.Now(ctx)
	}
	if until.IsZero() {
		return true, "", nil
	}
	if !g.timerAt.Equal(until) {
		g.timerAt = until
		sel.AddFuture(workflow.NewTimer(ctx, until.Sub(now)), func(workflow.Future) {})
	}
	return false, "", nil
}

// alerts is the alert gate: it asks Prometheus (prometheus.alerts, an
// activity) whether an alert of the set fires, at most once per Recheck
// while the answer holds the rollout. It returns when to ask again (zero:
// none fires, an item may start), or why to pause: held since
// State.HeldSince for PauseAfter. Prometheus that cannot be asked holds
// the rollout as a firing alert does: nothing tells that all is well.
func (g *gate) alerts(ctx workflow.Context, in *RolloutInput) (time.Time, string) {
	a, st := in.Alerts, &in.State
	now := workflow.Now(ctx)
	pauseAt := st.HeldSince.Add(a.PauseAfter)
	if g.holding != "" && now.Before(g.checkedAt.Add(a.Recheck)) && now.Before(pauseAt) {
		g.waiting = g.holdText(a, st)
		return earliest(g.checkedAt.Add(a.Recheck), pauseAt), ""
	}
	g.asked++
	firing, err := askAlerts(ctx, in, g.asked)
	now = workflow.Now(ctx)
	g.checkedAt = now
	switch {
	case err != nil:
		g.holding = "alerts unknown: " + clip(errorMessage(err), 300)
	case len(firing) > 0:
		g.holding = "alerts firing: " + strings.Join(firing, ", ")
	default:
		g.holding, st.HeldSince = "", time.Time{}
		return time.Time{}, ""
	}
	if st.HeldSince.IsZero() {
		st.HeldSince = now
	}
	if held := now.Sub(st.HeldSince); held >= a.PauseAfter {
		return time.Time{}, fmt.Sprintf("%s, holding for %s (pauseAfter %s)", g.holding, held.Round(time.Second), a.PauseAfter)
	}
	g.waiting = g.holdText(a, st)
	return earliest(now.Add(a.Recheck), st.HeldSince.Add(a.PauseAfter)), ""
}

// holdText is the waiting line of a rollout the alert gate holds.
func (g *gate) holdText(a *plan.AlertGate, st *RolloutState) string {
	return fmt.Sprintf("held: %s (since %s; asking again every %s, pausing for a decision at %s)",
		g.holding, st.HeldSince.UTC().Format("15:04:05 UTC"), a.Recheck, st.HeldSince.Add(a.PauseAfter).UTC().Format("15:04:05 UTC"))
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// askAlerts runs prometheus.alerts for the gate, on the cluster's task
// queue, and returns the names of the firing alerts of the set. A
// Prometheus that does not answer is asked again a few times, seconds
// apart, within the one call.
func askAlerts(ctx workflow.Context, in *RolloutInput, n int) ([]string, error) {
	action, ok := actions.Lookup(prometheus.AlertsAction)
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError("no action "+prometheus.AlertsAction, errtype.InvalidInput, nil)
	}
	a := in.Alerts
	input := prometheus.AlertsInput{URL: a.URL, Names: a.Names}
	actx := workflow.WithActivityOptions(onSite(ctx, in.Cluster.TaskQueue), workflow.ActivityOptions{
		// The worker keeps the attempts' budget (a lost attempt is no
		// failure), as for a step's action.
		ActivityID:          attempt.ID(in.Step, "", n, alertsAttempts),
		StartToCloseTimeout: action.Timeout,
		HeartbeatTimeout:    action.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			MaximumAttempts: int32(alertsAttempts + attempt.Lost), NonRetryableErrorTypes: errtype.NotRetried(),
		},
		Summary: fmt.Sprintf("before the next item of %s, ask Prometheus whether %s fire", in.Step, clip(strings.Join(a.Names, ", "), 200)),
	})
	var res prometheus.AlertsResult
	if err := workflow.ExecuteActivity(actx, action.Name, input).Get(ctx, &res); err != nil {
		return nil, err
	}
	return res.Names, nil
}

// alertsAttempts is how many times one question of the alert gate is
// asked before the gate counts Prometheus as unanswering (and holds).
const alertsAttempts = 3

// heldHistoryLimit is the history length past which a rollout its alerts
// hold, with nothing running, continues as new: each question and its
// timer are a few events, and a hold may last long.
const heldHistoryLimit = 10000

// longHistory says whether this run's history is long enough for a held
// rollout to continue as new.
func longHistory(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > heldHistoryLimit
}

// window is the window's state at now, computed again only once the last
// one has run out.
func (g *gate) window(ctx workflow.Context, spec window.Spec, now time.Time) window.State {
	if g.known != nil && now.Before(g.known.Until) {
		return *g.known
	}
	var st window.State
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		w, err := window.Parse(spec)
		if err != nil {
			return window.State{} // checked before the run: never here
		}
		return w.At(now)
	}).Get(&st)
	if err != nil {
		st = window.State{}
	}
	g.known = &st
	return st
}
