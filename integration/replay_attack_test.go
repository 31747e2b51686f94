package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// These tests are written from the side of someone who reaches Temporal's
// frontend without the codec key (in `kedge dev` anyone on the machine;
// in the team install a holder of a client certificate). They can read
// every run's history, sealed payloads included, and send those payloads
// anywhere. Nothing they copy may make the worker act.

// keyless is a client with no codec: what the attacker holds.
func keyless(t *testing.T) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: world.srv.FrontendAddress(), Namespace: world.srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// events is a run's history as stored: sealed payloads stay sealed.
func events(t *testing.T, c client.Client, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	var out []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(t.Context(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// scheduledActivities lists the activity types a run scheduled.
func scheduledActivities(t *testing.T, c client.Client, id, runID string) []string {
	t.Helper()
	var out []string
	for _, e := range events(t, c, id, runID) {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			out = append(out, a.GetActivityType().GetName())
		}
	}
	return out
}

func requestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startRaw starts a workflow with payloads copied byte for byte.
func startRaw(t *testing.T, c client.Client, id, typeName string, input *commonpb.Payloads) string {
	t.Helper()
	resp, err := c.WorkflowService().StartWorkflowExecution(t.Context(), &workflowservice.StartWorkflowExecutionRequest{
		Namespace:             world.srv.Namespace(),
		WorkflowId:            id,
		WorkflowType:          &commonpb.WorkflowType{Name: typeName},
		TaskQueue:             &taskqueuepb.TaskQueue{Name: workflows.DefaultTaskQueue},
		Input:                 input,
		Identity:              "mallory",
		RequestId:             requestID(),
		WorkflowIdReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return resp.GetRunId()
}

// endsWith waits for a run to close and returns its error.
func endsWith(t *testing.T, id, runID string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	return world.client.GetWorkflow(ctx, id, runID).Get(ctx, nil)
}

const replayCounter = "/var/lib/kedge-replayed"

const replayedRunbook = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: replayed}
steps:
  - id: count
    action: host.run
    on: worker-1
    with: {command: "echo ran >> ` + replayCounter + `"}
`

// A sealed start copied from a finished run, under a new workflow ID and
// under its own ID again, and a Temporal reset of that run: the host step
// never runs again.
func TestACopiedStartOrAResetRunsNothingAgain(t *testing.T) {
	mainLane.join(t)
	_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-f", replayCounter)
	p, code, errOut := runWait(t, writeRunbook(t, replayedRunbook))
	if code != 0 {
		t.Fatalf("the key holder's run: exit %d: %s", code, errOut)
	}
	if n := lines(t, "worker-1", replayCounter, "ran"); n != 1 {
		t.Fatalf("the first run ran its step %d times", n)
	}
	mallory := keyless(t)
	hist := events(t, mallory, p.WorkflowID, p.RunID)
	start := hist[0].GetWorkflowExecutionStartedEventAttributes()
	typeName := start.GetWorkflowType().GetName()

	t.Run("under a new workflow ID", func(t *testing.T) {
		id := p.WorkflowID + "-again"
		runID := startRaw(t, mallory, id, typeName, start.GetInput())
		if err := endsWith(t, id, runID); err == nil || !strings.Contains(err.Error(), "belongs to another workflow") {
			t.Fatalf("the copied start ended with %v", err)
		}
		if acts := scheduledActivities(t, mallory, id, runID); len(acts) != 0 {
			t.Errorf("the copied start scheduled %v", acts)
		}
	})

	t.Run("under its ID and a time, as a schedule names its runs", func(t *testing.T) {
		id := p.WorkflowID + "-" + time.Now().UTC().Format(time.RFC3339)
		runID := startRaw(t, mallory, id, typeName, start.GetInput())
		if err := endsWith(t, id, runID); err == nil || !strings.Contains(err.Error(), "belongs to another workflow") {
			t.Fatalf("the copied start ended with %v", err)
		}
		if acts := scheduledActivities(t, mallory, id, runID); len(acts) != 0 {
			t.Errorf("the copied start scheduled %v", acts)
		}
	})

	t.Run("under its own workflow ID", func(t *testing.T) {
		runID := startRaw(t, mallory, p.WorkflowID, typeName, start.GetInput())
		err := endsWith(t, p.WorkflowID, runID)
		if err == nil || !strings.Contains(err.Error(), "another run of "+p.WorkflowID+" exists") {
			t.Fatalf("the copied start ended with %v", err)
		}
		if acts := scheduledActivities(t, mallory, p.WorkflowID, runID); len(acts) != 1 || acts[0] != workflows.AdmitRunActivity {
			t.Errorf("the copied start scheduled %v, want only the admission check", acts)
		}
	})

	t.Run("reset of the closed run", func(t *testing.T) {
		var firstTask int64
		for _, e := range hist {
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				firstTask = e.GetEventId()
				break
			}
		}
		resp, err := mallory.ResetWorkflowExecution(t.Context(), &workflowservice.ResetWorkflowExecutionRequest{
			Namespace:                 world.srv.Namespace(),
			WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: p.WorkflowID, RunId: p.RunID},
			Reason:                    "mallory wants it again",
			WorkflowTaskFinishEventId: firstTask,
			RequestId:                 requestID(),
		})
		if err != nil {
			t.Fatalf("reset: %v", err)
		}
		runID := resp.GetRunId()
		t.Cleanup(func() { _ = world.client.TerminateWorkflow(context.Background(), p.WorkflowID, runID, "test over") })
		// The worker refuses the reset run's first workflow task, and
		// every retry of it: the history gains a failed task and nothing
		// after the reset point.
		eventually(t, time.Minute, "the reset run's workflow task to fail", func() bool {
			for _, e := range events(t, mallory, p.WorkflowID, runID)[firstTask:] {
				if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED &&
					e.GetWorkflowTaskFailedEventAttributes().GetCause() != enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
					return true
				}
			}
			return false
		})
		for _, e := range events(t, mallory, p.WorkflowID, runID)[firstTask:] {
			if e.GetActivityTaskScheduledEventAttributes() != nil || e.GetTimerStartedEventAttributes() != nil ||
				e.GetStartChildWorkflowExecutionInitiatedEventAttributes() != nil {
				t.Errorf("the reset run acted: %v", e.GetEventType())
			}
		}
	})

	if n := lines(t, "worker-1", replayCounter, "ran"); n != 1 {
		t.Errorf("the host step ran %d times in all, want once", n)
	}

	// What a key holder does instead of a reset: `kedge rerun`, a new run
	// sealed anew.
	out, errOut, code := kedge(t, "rerun", p.WorkflowID, "--run-id", p.RunID, "--wait", "--output", "json")
	if code != 0 {
		t.Fatalf("kedge rerun: exit %d: %s %s", code, out, errOut)
	}
	if n := lines(t, "worker-1", replayCounter, "ran"); n != 2 {
		t.Errorf("after kedge rerun the step ran %d times, want 2", n)
	}
}

// A start with no input, or an empty one, fails before any step: no fake
// successful runs in the list and the Web UI.
func TestAnEmptyStartFails(t *testing.T) {
	mainLane.join(t)
	mallory := keyless(t)
	for _, typeName := range []string{workflows.RunbookWorkflow, workflows.RolloutWorkflow, workflows.CompensateWorkflow, workflows.TypeOf("hello")} {
		for name, input := range map[string]*commonpb.Payloads{"no input": nil, "nil": {Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("binary/null")}}}}} {
			id := "empty/" + typeName + "/" + strings.ReplaceAll(name, " ", "-") + "/" + requestID()
			runID := startRaw(t, mallory, id, typeName, input)
			err := endsWith(t, id, runID)
			if err == nil {
				t.Errorf("%s with %s completed", typeName, name)
				continue
			}
			if acts := scheduledActivities(t, mallory, id, runID); len(acts) != 0 {
				t.Errorf("%s with %s scheduled %v", typeName, name, acts)
			}
		}
	}
}

// A sealed approval copied from one run's history does not approve
// another run's gate.
func TestACopiedApprovalApprovesNothing(t *testing.T) {
	mainLane.join(t)
	// Two runbooks alike but for their names: one run of a runbook per
	// cluster at a time, so the two runs waiting side by side are of two.
	gated := func(name string) string {
		return writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: `+name+`}
steps:
  - id: gate
    approval: {prompt: "Go on?"}
  - id: after
    needs: [gate]
    action: host.run
    on: worker-1
    with: {command: "echo approved >> /var/lib/kedge-approved"}
`)
	}
	_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-f", "/var/lib/kedge-approved")
	a, b := startRun(t, gated("gated-twice")), startRun(t, gated("gated-twice-b"))
	t.Cleanup(func() { _ = world.client.TerminateWorkflow(context.Background(), b, "", "test over") })
	eventually(t, 30*time.Second, "both gates to wait", func() bool { return gateWaiting(a) && gateWaiting(b) })
	if _, errOut, code := kedge(t, "approve", a, "--by", "alice"); code != 0 {
		t.Fatalf("approve %s: %s", a, errOut)
	}
	if _, code := watch(t, a); code != 0 {
		t.Fatalf("%s did not finish after its approval", a)
	}
	mallory := keyless(t)
	var sealed *commonpb.Payloads
	for _, e := range events(t, mallory, a, "") {
		if u := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); u != nil {
			sealed = u.GetAcceptedRequest().GetInput().GetArgs()
		}
	}
	if sealed == nil {
		t.Fatal("no accepted update in the approved run's history")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := mallory.WorkflowService().UpdateWorkflowExecution(ctx, &workflowservice.UpdateWorkflowExecutionRequest{
		Namespace:         world.srv.Namespace(),
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: b},
		Request: &updatepb.Request{
			Meta:  &updatepb.Meta{UpdateId: requestID(), Identity: "mallory"},
			Input: &updatepb.Input{Name: workflows.ApproveUpdate, Args: sealed},
		},
		WaitPolicy: &updatepb.WaitPolicy{LifecycleStage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED},
	})
	if err == nil && resp.GetOutcome().GetFailure() == nil {
		t.Fatalf("the copied approval was accepted by %s", b)
	}
	if !gateWaiting(b) {
		t.Errorf("%s no longer waits at its gate", b)
	}
	if n := lines(t, "worker-1", "/var/lib/kedge-approved", "approved"); n != 1 {
		t.Errorf("the step after the gate ran %d times, want once (run %s only)", n, a)
	}
}
