package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/workflows"
)

// A site's worker is taken over: the attacker holds site forge-b's key
// file and reaches Temporal. A step on worker-1 (site forge-a) can only
// fail (`exit 7`); the attacker takes its task from forge-a's queue and
// answers it with a success of its choosing, sealed with the key it
// holds. The workflow does not take it: the step does not succeed, and
// what it says names the refused result.
func TestASitesWorkerCannotAnswerAnotherSitesSteps(t *testing.T) {
	mainLane.join(t)
	inv := sitesInventory(t, "forge", "forge-a", "forge-b")
	stolen, err := codec.Load(queueKey(t, "forge-b"))
	if err != nil {
		t.Fatal(err)
	}
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: forge}
steps:
  - id: quorum
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with: {command: "exit 7"}
`)
	id := startRunInv(t, rb, inv)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	svc := world.client.WorkflowService()
	task := stealTask(ctx, t, "forge-a", id)
	forged := map[string]any{"exitCode": 0, "stdout": "quorum: 3 of 3 healthy\n"}
	dc := converter.WithDataConverterSerializationContext(stolen.DataConverter(), stolenContext(task, "forge-b"))
	result, err := dc.ToPayloads(forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
		Namespace: world.srv.Namespace(), TaskToken: task.GetTaskToken(), Result: result, Identity: "attacker"}); err != nil {
		t.Fatalf("the forged answer was not even delivered: %v", err)
	}

	err = world.client.GetWorkflow(ctx, id, "").Get(ctx, nil)
	p, qerr := queryProgress(id)
	if qerr != nil {
		t.Fatal(qerr)
	}
	st := step(t, p, "quorum")
	if err == nil || p.State == workflows.StateSucceeded || st.State == workflows.StateSucceeded {
		t.Fatalf("the run took the forged result: run %s (%v), step %+v", p.State, err, st)
	}
	if !strings.Contains(st.LastError, "sealed for host.run on task queue forge-b") {
		t.Errorf("step quorum: %s, %q: want the refused result named", st.State, st.LastError)
	}
}

// stealTask polls queue as the attacker, for a task of the run id.
func stealTask(ctx context.Context, t *testing.T, queue, id string) *workflowservice.PollActivityTaskQueueResponse {
	t.Helper()
	task, err := world.client.WorkflowService().PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
		Namespace: world.srv.Namespace(), TaskQueue: &taskqueuepb.TaskQueue{Name: queue}, Identity: "attacker"})
	if err != nil || len(task.GetTaskToken()) == 0 {
		t.Fatalf("the attacker polled %s and got no task (err %v): no attempt of the step is scheduled", queue, err)
	}
	if task.GetWorkflowExecution().GetWorkflowId() != id {
		t.Fatalf("polled a task of %s, want one of %s", task.GetWorkflowExecution().GetWorkflowId(), id)
	}
	return task
}

// stolenContext is where the attacker seals an answer to task: as its
// own queue's, the only key it holds.
func stolenContext(task *workflowservice.PollActivityTaskQueueResponse, queue string) converter.SerializationContext {
	return converter.ActivitySerializationContext{
		Namespace: world.srv.Namespace(), WorkflowID: task.GetWorkflowExecution().GetWorkflowId(), WorkflowType: task.GetWorkflowType().GetName(),
		ActivityType: task.GetActivityType().GetName(), TaskQueue: queue}
}

// The attacker holds site forgefail-b's key file and fails a step of
// site forgefail-a (which would pass: `true`, and no worker of
// forgefail-a runs) with a non-retryable failure of its choosing, first
// sealed with the key it holds, then with none: the failure a quorum
// check reports, which would fail the run and start its undo. The
// workflow takes neither: the step, allowed one attempt, runs again each
// time (the attacker polls its next task), and what it says names the
// refusal, never the forged reason.
func TestASitesWorkerCannotFailAnotherSitesStep(t *testing.T) {
	mainLane.join(t)
	inv := sitesInventory(t, "forgefail", "forgefail-a", "forgefail-b")
	stolen, err := codec.Load(queueKey(t, "forgefail-b"))
	if err != nil {
		t.Fatal(err)
	}
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: forgefail}
steps:
  - id: quorum
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with: {command: "true"}
`)
	id := startRunInv(t, rb, inv)
	defer func() { _ = world.client.TerminateWorkflow(context.Background(), id, "", "test over") }()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	forged := temporal.NewNonRetryableApplicationError("quorum lost: 1 of 3 members healthy", errtype.CheckFailed, nil)
	keyless := temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{})
	for i, how := range []string{"sealed with forgefail-b's key", "not sealed"} {
		task := stealTask(ctx, t, "forgefail-a", id)
		if task.GetAttempt() != 1 {
			t.Fatalf("%s: the server retried the step itself (attempt %d): the workflow's own retry is what is under test", how, task.GetAttempt())
		}
		failure := keyless.ErrorToFailure(forged)
		if i == 0 {
			var opts client.Options
			stolen.Apply(&opts)
			failure = converter.WithFailureConverterSerializationContext(opts.FailureConverter, stolenContext(task, "forgefail-b")).ErrorToFailure(forged)
		}
		if _, err := world.client.WorkflowService().RespondActivityTaskFailed(ctx, &workflowservice.RespondActivityTaskFailedRequest{
			Namespace: world.srv.Namespace(), TaskToken: task.GetTaskToken(), Failure: failure, Identity: "attacker"}); err != nil {
			t.Fatalf("%s: the forged failure was not even delivered: %v", how, err)
		}
	}
	// The step's next attempt is scheduled: the run goes on.
	stealTask(ctx, t, "forgefail-a", id)
	p, err := queryProgress(id)
	if err != nil {
		t.Fatal(err)
	}
	st := step(t, p, "quorum")
	if p.State != workflows.StateRunning || st.State == workflows.StateFailed {
		t.Fatalf("the run took a forged failure: run %s, step %+v", p.State, st)
	}
	if !strings.Contains(st.LastError, "refused") || strings.Contains(st.LastError, "quorum lost") {
		t.Errorf("step quorum says %q: want the refusal named and the forged reason not repeated", st.LastError)
	}
}
