package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/workflows"
)

// The codec key is the capability to run anything: a client that reaches
// Temporal without it starts a well-formed runbook on Kedge's task queue,
// and the worker refuses its input, so no activity is ever scheduled and
// the host is untouched. The same runbook started with the key runs.
func TestAClientWithoutTheKeyRunsNothing(t *testing.T) {
	mainLane.join(t)
	h := labHost(t, "worker-1")
	const marker = "/tmp/kedge-unsealed-start"
	_, _ = h.Exec(t.Context(), "rm", "-f", marker)
	file := writeRunbook(t, `apiVersion: kedge/v1
kind: Runbook
metadata:
  name: unsealed
steps:
  - id: touch
    action: host.run
    on: worker-1
    with:
      command: touch `+marker+`
`)
	cluster, err := inventory.LoadFile(world.inventory)
	if err != nil {
		t.Fatal(err)
	}
	world.clusters.Put(cluster) // the worker serves lab: only the missing key stops the run
	lib := &runbooks.Library{Builtin: runbooks.Builtin}
	loaded, err := lib.LoadFile(file, cluster)
	if err != nil {
		t.Fatal(err)
	}
	params, err := runbooks.ResolveParams(loaded.Runbook, nil, cluster)
	if err != nil {
		t.Fatal(err)
	}
	in := workflows.RunbookInput{Runbook: *loaded.Runbook, Params: params, Cluster: *cluster}

	plain, err := client.Dial(client.Options{HostPort: world.srv.FrontendAddress(), Namespace: world.srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	const id = "unsealed/lab"
	run, err := plain.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.DefaultTaskQueue},
		workflows.Describe(in).WorkflowType, in)
	if err != nil {
		t.Fatal(err)
	}
	// The worker refuses the input when it decodes it: the run fails
	// before its first step, with nothing scheduled.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = world.client.GetWorkflow(ctx, id, run.GetRunID()).Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "not sealed with Kedge's codec key") {
		t.Fatalf("the unsealed run ended with %v", err)
	}
	it := world.client.GetWorkflowHistory(t.Context(), id, run.GetRunID(), false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_TIMER_STARTED:
			t.Errorf("the worker acted on the unsealed start: %v", e.GetEventType())
		}
	}
	if out, err := h.Exec(t.Context(), "test", "-e", marker); err == nil {
		t.Fatalf("the host was touched: %s", out)
	}

	// With the key, the same runbook runs.
	if p, code, errOut := runWait(t, file); code != 0 || !strings.Contains(p.State, "succeeded") {
		t.Fatalf("with the key: exit %d %s %+v", code, errOut, p)
	}
	if out, err := h.Exec(t.Context(), "test", "-e", marker); err != nil {
		t.Errorf("with the key the marker is missing: %v %s", err, out)
	}
}
