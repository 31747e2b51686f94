package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

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
	task, err := svc.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
		Namespace: world.srv.Namespace(), TaskQueue: &taskqueuepb.TaskQueue{Name: "forge-a"}, Identity: "attacker"})
	if err != nil || len(task.GetTaskToken()) == 0 {
		t.Fatalf("the attacker's poll of forge-a: %v", err)
	}
	if task.GetWorkflowExecution().GetWorkflowId() != id {
		t.Fatalf("polled a task of %s, want one of %s", task.GetWorkflowExecution().GetWorkflowId(), id)
	}
	forged := map[string]any{"exitCode": 0, "stdout": "quorum: 3 of 3 healthy\n"}
	dc := converter.WithDataConverterSerializationContext(stolen.DataConverter(), converter.ActivitySerializationContext{
		Namespace: world.srv.Namespace(), WorkflowID: id, WorkflowType: task.GetWorkflowType().GetName(),
		ActivityType: task.GetActivityType().GetName(), TaskQueue: "forge-b"})
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
