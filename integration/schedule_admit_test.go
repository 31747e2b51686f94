package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

const scheduledGated = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: sched-gated}
steps:
  - id: gate
    approval: {prompt: "Go on?"}
  - id: after
    needs: [gate]
    action: host.run
    on: controller-1
    with: {command: "true"}
`

// triggered fires a schedule at once and returns the run it started (the
// schedule's (n+1)th action). Temporal names a schedule's run by its
// time to the second: a trigger within the second of the last one would
// name its run as the last one's, so it waits for the next second.
func triggered(t *testing.T, h client.ScheduleHandle, n int) *client.ScheduleWorkflowExecution {
	t.Helper()
	if d, err := h.Describe(t.Context()); err == nil && len(d.Info.RecentActions) > 0 {
		last := d.Info.RecentActions[len(d.Info.RecentActions)-1].ScheduleTime.Truncate(time.Second)
		eventually(t, 5*time.Second, "the second after the schedule's last run", func() bool {
			return time.Now().Truncate(time.Second).After(last)
		})
	}
	if err := h.Trigger(t.Context(), client.ScheduleTriggerOptions{}); err != nil {
		t.Fatalf("trigger %s: %v", h.GetID(), err)
	}
	var run *client.ScheduleWorkflowExecution
	eventually(t, 30*time.Second, fmt.Sprintf("schedule %s to start run %d", h.GetID(), n+1), func() bool {
		d, err := h.Describe(t.Context())
		if err != nil || len(d.Info.RecentActions) <= n {
			return false
		}
		run = d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult
		return run != nil
	})
	return run
}

// A schedule's run is the one start no front door checks: the worker's
// admission refuses it while another run of the runbook is open on the
// cluster, naming that run, and the schedule's next run, once the cluster
// is free, runs.
func TestScheduledRunIsSkippedBesideAnOpenRun(t *testing.T) {
	mainLane.join(t)
	rb := writeRunbook(t, scheduledGated)
	id := startRun(t, rb)
	open := []string{id}
	defer func() {
		for _, o := range open {
			_, _, _ = kedge(t, "cancel", o)
		}
	}()
	eventually(t, 30*time.Second, "the gate of "+id+" to wait", func() bool { return gateWaiting(id) })

	out, errOut, code := kedge(t, "schedule", rb, "--inventory", world.inventory, "--every", "24h", "--paused",
		"--id", "sched-gated/lab-admit", "--output", "json")
	if code != 0 {
		t.Fatalf("kedge schedule: exit %d: %s %s", code, out, errOut)
	}
	h := world.client.ScheduleClient().GetHandle(t.Context(), "sched-gated/lab-admit")
	t.Cleanup(func() { _ = h.Delete(context.Background()) })

	first := triggered(t, h, 0)
	open = append(open, first.WorkflowID)
	if !strings.HasPrefix(first.WorkflowID, "sched-gated/lab/scheduled-") {
		t.Errorf("the schedule's run is %s, want it under sched-gated/lab/scheduled-", first.WorkflowID)
	}
	err := waitClosed(t, first.WorkflowID, time.Minute)
	if want := "sched-gated already runs on lab: " + id + "; this scheduled run is skipped"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the scheduled run beside %s ended with %v, want %q", id, err, want)
	}
	if acts := scheduledActivities(t, world.client, first.WorkflowID, first.FirstExecutionRunID); len(acts) != 1 {
		t.Errorf("the refused scheduled run scheduled %v, want only its admission", acts)
	}

	if _, errOut, code := kedge(t, "approve", id, "--by", "alice"); code != 0 {
		t.Fatalf("approve %s: %s", id, errOut)
	}
	if err := waitClosed(t, id, time.Minute); err != nil {
		t.Fatalf("the gated run: %v", err)
	}
	second := triggered(t, h, 1)
	open = append(open, second.WorkflowID)
	var ended bool
	eventually(t, 30*time.Second, "the next scheduled run to wait at its gate", func() bool {
		d, err := world.client.DescribeWorkflowExecution(t.Context(), second.WorkflowID, "")
		ended = err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		return ended || gateWaiting(second.WorkflowID)
	})
	if ended {
		t.Fatalf("the scheduled run once the cluster was free ended at once: %v", waitClosed(t, second.WorkflowID, time.Minute))
	}
	if _, errOut, code := kedge(t, "approve", second.WorkflowID, "--by", "alice"); code != 0 {
		t.Fatalf("approve %s: %s", second.WorkflowID, errOut)
	}
	if err := waitClosed(t, second.WorkflowID, time.Minute); err != nil {
		t.Fatalf("the scheduled run once the cluster was free: %v", err)
	}
}
