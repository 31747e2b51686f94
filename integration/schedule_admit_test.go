package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	schedulepb "go.temporal.io/api/schedule/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
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

const scheduleCounter = "/var/lib/kedge-sched-ran"

const scheduledCount = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: sched-count}
steps:
  - id: count
    action: host.run
    on: worker-1
    with: {command: "echo ran >> ` + scheduleCounter + `"}
`

// Written from the side of someone who reaches Temporal without the codec
// key and can read a schedule (a viewer can describe it) and start or
// change workflows and schedules: a schedule's sealed action opens only in
// a run its schedule started, while the schedule exists unchanged since
// the action was sealed. Only the key holder's trigger runs the step.
func TestACopiedScheduleActionStartsNothing(t *testing.T) {
	mainLane.join(t)
	ctx := t.Context()
	_, _ = labHost(t, "worker-1").Exec(ctx, "rm", "-f", scheduleCounter)
	rb := writeRunbook(t, scheduledCount)
	const id = "sched-count/lab-copied"
	const actionID = "sched-count/lab/scheduled"
	schedule := func() {
		t.Helper()
		out, errOut, code := kedge(t, "schedule", rb, "--inventory", world.inventory, "--every", "24h", "--paused", "--id", id, "--output", "json")
		if code != 0 {
			t.Fatalf("kedge schedule: exit %d: %s %s", code, out, errOut)
		}
	}
	schedule()
	h := world.client.ScheduleClient().GetHandle(ctx, id)
	t.Cleanup(func() { _ = h.Delete(context.Background()) })

	mallory := keyless(t)
	described := func() *schedulepb.Schedule {
		t.Helper()
		d, err := mallory.WorkflowService().DescribeSchedule(ctx, &workflowservice.DescribeScheduleRequest{Namespace: world.srv.Namespace(), ScheduleId: id})
		if err != nil {
			t.Fatalf("describe schedule %s: %v", id, err)
		}
		return d.GetSchedule()
	}
	first := described().GetAction().GetStartWorkflow()
	typeName := first.GetWorkflowType().GetName()
	copies := 0
	// startedByHand starts the action under the ID its schedule's runs
	// take, at a time no run of the schedule has.
	startedByHand := func(t *testing.T, input *commonpb.Payloads, want string) {
		t.Helper()
		copies++
		runID := actionID + "-" + time.Now().UTC().Add(time.Duration(copies)*time.Hour).Format(time.RFC3339)
		run := startRaw(t, mallory, runID, typeName, input)
		err := endsWith(t, runID, run)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("the copied action ended with %v, want %q", err, want)
		}
		if acts := scheduledActivities(t, mallory, runID, run); len(acts) > 1 || len(acts) == 1 && acts[0] != workflows.AdmitRunActivity {
			t.Errorf("the copied action scheduled %v, want at most its admission", acts)
		}
	}

	t.Run("started by hand", func(t *testing.T) {
		startedByHand(t, first.GetInput(), "schedule "+id+" did not start this run")
	})
	t.Run("triggered by its schedule", func(t *testing.T) {
		run := triggered(t, h, 0)
		if err := waitClosed(t, run.WorkflowID, time.Minute); err != nil {
			t.Fatalf("the key holder's scheduled run: %v", err)
		}
	})
	if n := lines(t, "worker-1", scheduleCounter, "ran"); n != 1 {
		t.Fatalf("the step ran %d times, want once (the schedule's run)", n)
	}

	schedule() // the key holder updates it: a new action
	t.Run("the old action by hand after an update", func(t *testing.T) {
		startedByHand(t, first.GetInput(), "schedule "+id+" did not start this run")
	})
	t.Run("an older action put back into the schedule", func(t *testing.T) {
		// What the key holder sealed for this schedule a while ago (the
		// test holds the key and plays them): a copy of it put back into
		// the schedule without the key, and the schedule triggered.
		var in workflows.RunbookInput
		if err := world.codec.DataConverter().FromPayloads(first.GetInput(), &in); err != nil {
			t.Fatal(err)
		}
		in.Admission.IssuedAt = time.Now().UTC().Add(-2 * workflows.ScheduleSealWindow)
		old, err := world.codec.SealScheduleAction(world.srv.Namespace(), id, actionID, in)
		if err != nil {
			t.Fatal(err)
		}
		s := described()
		s.GetAction().GetStartWorkflow().Input = &commonpb.Payloads{Payloads: []*commonpb.Payload{old}}
		if _, err := mallory.WorkflowService().UpdateSchedule(ctx, &workflowservice.UpdateScheduleRequest{
			Namespace: world.srv.Namespace(), ScheduleId: id, Schedule: s, Identity: "mallory", RequestId: requestID(),
		}); err != nil {
			t.Fatalf("update the schedule: %v", err)
		}
		run := triggered(t, h, 1)
		err = waitClosed(t, run.WorkflowID, time.Minute)
		if err == nil || !strings.Contains(err.Error(), "schedule "+id+" was made or changed at") {
			t.Fatalf("the run of the action put back ended with %v", err)
		}
	})
	current := described().GetAction().GetStartWorkflow().GetInput()
	if err := h.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("after the schedule was deleted", func(t *testing.T) {
		startedByHand(t, current, "schedule "+id+" no longer exists")
	})
	if n := lines(t, "worker-1", scheduleCounter, "ran"); n != 1 {
		t.Errorf("the step ran %d times in all, want once (the schedule's own run)", n)
	}
}
