package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/internal/window"
)

// gate decides when a rollout may start its next item: while its window
// is open and once its delay since the last item's end has passed. When
// it may not, it arms one durable timer for the moment it may, so the
// rollout's selector wakes then, and says why in waiting.
type gate struct {
	// known is the window's state until known.Until: an open window
	// stays open, a closed one closed, until then, so the window is
	// computed (in a side effect: time zones are data read from the
	// worker's disk) once per opening and once per closing, not per item.
	known   *window.State
	timerAt time.Time // the moment the armed timer fires
	waiting string
}

// open says whether an item may start now.
func (g *gate) open(ctx workflow.Context, sel workflow.Selector, in *RolloutInput, lastEnd time.Time) (bool, error) {
	if in.Window == nil && in.Delay <= 0 {
		return true, nil
	}
	now := workflow.Now(ctx)
	g.waiting = ""
	var until time.Time
	if in.Delay > 0 && !lastEnd.IsZero() && now.Before(lastEnd.Add(in.Delay)) {
		until = lastEnd.Add(in.Delay)
		g.waiting = fmt.Sprintf("waiting %s between items: the next starts at %s", in.Delay, until.UTC().Format("15:04:05 UTC"))
	}
	if until.IsZero() && in.Window != nil {
		st := g.window(ctx, *in.Window, now)
		if !st.Open {
			if st.Until.IsZero() {
				return false, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("the rollout's window %q never opens again", in.Window.Schedule), "WindowNeverOpens", nil)
			}
			until = st.Until
			g.waiting = st.Describe(now)
		}
	}
	if until.IsZero() {
		return true, nil
	}
	if !g.timerAt.Equal(until) {
		g.timerAt = until
		sel.AddFuture(workflow.NewTimer(ctx, until.Sub(now)), func(workflow.Future) {})
	}
	return false, nil
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
