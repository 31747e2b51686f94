package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// stallAfter is how long a run may show no progress at all (no new event
// anywhere in its tree of workflows) before a long test or benchmark gives
// up on it. There is no deadline on the whole run: a slow machine is
// slow, not stuck.
const stallAfter = 3 * time.Minute

// awaitRun waits for a run to end, however long it takes while it moves;
// it fails, saying where, when nothing moved for stallAfter.
func awaitRun(tb testing.TB, run client.WorkflowRun) error {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- run.Get(context.Background(), nil) }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	last, lastMove := -1, time.Now()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			events, where := runTree(run.GetID(), run.GetRunID())
			if events != last {
				last, lastMove = events, time.Now()
				continue
			}
			if time.Since(lastMove) > stallAfter {
				tb.Fatalf("%s made no progress for %s (%d events in its workflows); where it stands:\n%s", run.GetID(), stallAfter, events, where)
			}
		}
	}
}

// runTree sums the history lengths of a run and of its running children,
// recursively, and describes what each is waiting on.
func runTree(id, runID string) (int, string) {
	var b strings.Builder
	total := 0
	var walk func(id, runID string, depth int)
	walk = func(id, runID string, depth int) {
		if depth > 3 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, err := world.client.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			fmt.Fprintf(&b, "%s%s: %v\n", strings.Repeat("  ", depth), id, err)
			return
		}
		info := d.GetWorkflowExecutionInfo()
		total += int(info.GetHistoryLength())
		fmt.Fprintf(&b, "%s%s: %s, %d events\n", strings.Repeat("  ", depth), id, info.GetStatus(), info.GetHistoryLength())
		for _, a := range d.GetPendingActivities() {
			fmt.Fprintf(&b, "%s  activity %s: %s, attempt %d %s\n", strings.Repeat("  ", depth), a.GetActivityType().GetName(), a.GetState(), a.GetAttempt(), a.GetLastFailure().GetMessage())
		}
		for _, c := range d.GetPendingChildren() {
			walk(c.GetWorkflowId(), c.GetRunId(), depth+1)
		}
	}
	walk(id, runID, 0)
	return total, b.String()
}
