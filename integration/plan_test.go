package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"kedge.dev/kedge/runbooks/plan"
	"kedge.dev/kedge/workflows"
)

// What `kedge plan --output json` prints is what a real run does: every
// activity the run and its children scheduled, as their histories hold
// them (decoded with the codec key), pairs with a planned call: the same
// run, action, task queue (two sites' workers) and input, but for the one
// input the plan says is known only at run time.
func TestPlanIsWhatRanOnTheLab(t *testing.T) {
	mainLane.join(t)
	inv := sitesInventory(t, "plansites", "plan-a", "plan-b")
	siteWorker(t, "plan-a", "kedge-plan-a", regexp.MustCompile(`polling task queue plan-a`), "--clusters", inv)
	siteWorker(t, "plan-b", "kedge-plan-b", regexp.MustCompile(`polling task queue plan-b`), "--clusters", inv)
	dir := t.TempDir()
	files := map[string]string{
		"plan-node": `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: plan-node}
params:
  node: {type: string, required: true}
  note: {type: string, required: true}
steps:
  - id: touch
    action: host.run
    on: ${ params.node }
    with: {command: "mkdir -p /var/lib/plan && echo \"$NOTE\" >> /var/lib/plan/log", env: {NOTE: "${ params.note }"}}
`,
		"plan-run": `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: plan-run}
params:
  nodes: {type: nodes, default: workers}
steps:
  - id: facts
    action: host.run
    on: all
    with: {command: "uname -n"}
  - id: use
    needs: [facts]
    action: host.run
    on: controller-1
    with: {command: "test -n \"$SEEN\"", env: {SEEN: "${ steps.facts.outputs['worker-2'].stdout }"}}
  - id: roll
    needs: [use]
    runbook: plan-node
    rollout: {over: "${ params.nodes }", maxUnavailable: 2}
    with: {node: "${ item }", note: "rolled ${ item }"}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rb := filepath.Join(dir, "plan-run.yaml")
	out, errOut, code := kedge(t, "plan", rb, "--inventory", inv, "--output", "json")
	if code != 0 {
		t.Fatalf("kedge plan: exit %d: %s", code, errOut)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan JSON: %v\n%s", err, out)
	}
	prog, code, errOut := runWaitInv(t, rb, inv)
	if code != 0 || prog.State != workflows.StateSucceeded {
		t.Fatalf("run: exit %d %s\n%+v", code, errOut, prog)
	}
	ran := ranOf(t, prog.WorkflowID)
	v := plan.Verify(&p, ran, plan.RunIDs{Root: prog.WorkflowID, Child: workflows.ChildWorkflowID, Item: workflows.NodeWorkflowID}, "", nil)
	for _, problem := range v.Problems {
		t.Error(problem)
	}
	// facts on 3 hosts, use, one touch per worker.
	if len(ran) != 6 || v.Compared != 6 || v.Deferred != 1 {
		t.Errorf("%d calls ran, %d compared with the plan (%d inputs known only at run time), want 6, 6 and 1", len(ran), v.Compared, v.Deferred)
	}
}

// ranOf lists the activities a run and its children scheduled, with
// their inputs decoded, but for the run's admission (the workflow's own
// bookkeeping, not a planned call).
func ranOf(t *testing.T, id string) []plan.Ran {
	t.Helper()
	var out []plan.Ran
	var walk func(id, runID string)
	walk = func(id, runID string) {
		it := world.client.GetWorkflowHistory(t.Context(), id, runID, false, 0)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s: %v", id, err)
			}
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				name := a.GetActivityType().GetName()
				if name == workflows.AdmitRunActivity {
					continue
				}
				var in map[string]any
				if err := world.codec.DataConverter().FromPayloads(a.GetInput(), &in); err != nil {
					t.Fatalf("decode input of %s in %s: %v", name, id, err)
				}
				out = append(out, plan.Ran{Workflow: id, Action: name, TaskQueue: a.GetTaskQueue().GetName(), Input: in})
			}
			if c := e.GetChildWorkflowExecutionStartedEventAttributes(); c != nil {
				walk(c.GetWorkflowExecution().GetWorkflowId(), c.GetWorkflowExecution().GetRunId())
			}
		}
	}
	walk(id, "")
	return out
}
