package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"kedge.dev/kedge/workflows"
)

// A rollout starts at most RolloutInput.ItemsPerRun items in one run, then
// continues as new with what it has done so far. A runbook's rollout step
// always runs with the default (500), so this test starts the rollout
// from a parent workflow of its own, registered only on a worker of the
// test's own task queue: it sets ItemsPerRun to 2 over 5 items, and runs
// the rollout (and the node runbooks) on the world's worker, as a
// runbook's step would. The three runs' histories are what
// workflows/replay_test.go replays (KEDGE_RECORD_HISTORY).

const (
	continueQueue  = "kedge-it-continue"
	continueParent = "kedge-it-continue-parent"
)

func continueParentWorkflow(ctx workflow.Context, in workflows.RolloutInput) (workflows.RolloutResult, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: workflows.ChildWorkflowID(workflow.GetInfo(ctx).WorkflowExecution.ID, in.Step),
		TaskQueue:  workflows.DefaultTaskQueue,
	})
	var res workflows.RolloutResult
	err := workflow.ExecuteChildWorkflow(cctx, workflows.RolloutWorkflow, in).Get(ctx, &res)
	return res, err
}

func TestRolloutContinuesAsNew(t *testing.T) {
	mainLane.join(t)
	w := sdkworker.New(world.client, continueQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(continueParentWorkflow, workflow.RegisterOptions{Name: continueParent})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	workerServes(world.inventory)
	child := compile(t, writeRunbook(t, `apiVersion: kedge/v1
kind: Runbook
metadata: {name: continue-item}
params:
  item: {type: string}
steps:
  - id: mark
    action: host.run
    on: controller-1
    with: {command: "echo \"$ITEM\" >> /var/lib/continue-items", env: {ITEM: "${ params.item }"}}
`), world.inventory, map[string]any{"item": "none"})
	items := []string{"can-1", "can-2", "can-3", "can-4", "can-5"}
	in := workflows.RolloutInput{
		Step: "items", Runbook: child.Runbook, Cluster: child.Cluster, Items: items,
		With: map[string]any{"item": "${ item }"}, Vars: map[string]any{"params": map[string]any{}},
		MaxUnavailable: 1, ItemsPerRun: 2,
	}
	parent := "continue/lab/" + time.Now().UTC().Format("20060102-150405")
	run, err := world.client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: parent, TaskQueue: continueQueue}, continueParent, in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var res workflows.RolloutResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the rollout: %v", err)
	}
	if fmt.Sprint(res.Done) != fmt.Sprint(items) || len(res.Failed) != 0 {
		t.Errorf("the rollout's result: %+v, want every item done", res)
	}
	// Every item ran once, in order, across the runs.
	if got := strings.Fields(readHostFile(t, "controller-1", "/var/lib/continue-items")); fmt.Sprint(got[max(0, len(got)-len(items)):]) != fmt.Sprint(items) {
		t.Errorf("the items ran as %v, want %v", got, items)
	}

	ro := workflows.ChildWorkflowID(parent, "items")
	runs := runsOf(t, ro)
	if len(runs) != 3 {
		t.Fatalf("the rollout ran %d times, want 3 (5 items, 2 a run)", len(runs))
	}
	for i, r := range runs {
		events := runHistory(t, ro, r)
		last := events[len(events)-1]
		if i < len(runs)-1 {
			can := last.GetWorkflowExecutionContinuedAsNewEventAttributes()
			if can == nil || can.GetNewExecutionRunId() != runs[i+1] {
				t.Errorf("run %d of the rollout ended with %s, want a continue-as-new to run %s", i+1, last.GetEventType(), runs[i+1])
			}
		} else if last.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
			t.Errorf("the last run of the rollout ended with %s", last.GetEventType())
		}
		if i > 0 && events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != runs[i-1] {
			t.Errorf("run %d of the rollout does not continue run %d", i+1, i)
		}
		writeHistory(t, events, fmt.Sprintf("rollout-continue-%d", i+1))
	}
}

// runsOf lists a workflow ID's runs, oldest first.
func runsOf(t *testing.T, id string) []string {
	t.Helper()
	var runs []string
	eventually(t, 30*time.Second, "visibility to list every run of "+id, func() bool {
		resp, err := world.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: world.srv.Namespace(), Query: "WorkflowId = '" + id + "' AND ExecutionStatus != 'Running'"})
		if err != nil {
			return false
		}
		ex := resp.GetExecutions()
		sort.Slice(ex, func(i, j int) bool { return ex[i].GetStartTime().AsTime().Before(ex[j].GetStartTime().AsTime()) })
		runs = runs[:0]
		for _, e := range ex {
			runs = append(runs, e.GetExecution().GetRunId())
		}
		return len(ex) >= 3
	})
	return runs
}

// runHistory reads one run's events.
func runHistory(t *testing.T, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := world.client.GetWorkflowHistory(t.Context(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s run %s: %v", id, runID, err)
		}
		events = append(events, e)
	}
	if len(events) == 0 {
		t.Fatalf("no history for %s run %s", id, runID)
	}
	return events
}

// writeHistory is recordHistory for one run of a workflow ID that ran
// more than once (recordHistory reads the latest run).
func writeHistory(t *testing.T, events []*historypb.HistoryEvent, name string) {
	t.Helper()
	dir := os.Getenv("KEDGE_RECORD_HISTORY")
	if dir == "" {
		return
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s (%d events)", name, len(events))
}
