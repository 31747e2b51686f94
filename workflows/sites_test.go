package workflows

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"

	"kedge.dev/kedge/actions/host"
)

// Two sites: the controller and worker-1 are reached by the workers on
// site-a, worker-2 only by those on site-b.
const sitesInventory = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
taskQueue: site-a
ssh: {identityFile: /k/id, knownHostsFile: /k/known_hosts}
controllers:
  - {name: controller-1, address: 127.0.10.1}
workers:
  - {name: worker-1, address: 127.0.10.2}
  - {name: worker-2, address: 127.0.11.3, taskQueue: site-b}
`

const sitesRunbook = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: sites}
steps:
  - id: mark
    action: host.run
    on: all
    with: {command: mark}
    undo:
      action: host.run
      with: {command: unmark}
  - id: boom
    needs: [mark]
    action: host.run
    on: worker-2
    with: {command: boom}
`

// Every host action, its undo included, is scheduled on the task queue of
// its node's site.
func TestActionsRunOnTheirSiteQueue(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	asOnAWorker(env)
	Register(env)
	registerAdmit(env)
	var mu sync.Mutex
	var calls []string
	env.RegisterActivityWithOptions(func(ctx context.Context, in host.RunInput) (host.RunResult, error) {
		mu.Lock()
		calls = append(calls, in.Command+"@"+in.Target.Node+" on "+activity.GetInfo(ctx).TaskQueue)
		mu.Unlock()
		if in.Command == "boom" {
			return host.RunResult{ExitCode: 1}, temporal.NewNonRetryableApplicationError("exit status 1", "CommandFailed", nil)
		}
		return host.RunResult{}, nil
	}, activity.RegisterOptions{Name: host.RunAction})
	env.ExecuteWorkflow(Runbook, compileFor(t, sitesInventory, sitesRunbook))
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "failed at step boom") {
		t.Fatalf("want a failure at boom, got %v", err)
	}
	slices.Sort(calls)
	want := []string{
		"boom@worker-2 on site-b",
		"mark@controller-1 on site-a",
		"mark@worker-1 on site-a",
		"mark@worker-2 on site-b",
		"unmark@controller-1 on site-a",
		"unmark@worker-1 on site-a",
		"unmark@worker-2 on site-b",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}

// compileFor compiles a runbook against an inventory the way the CLI does.
func compileFor(t *testing.T, inv, rb string) RunbookInput {
	t.Helper()
	docs, err := source.Parse("inventory.yaml", []byte(inv))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := inventory.Decode(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	p := t.TempDir() + "/runbook.yaml"
	if err := writeFile(p, rb); err != nil {
		t.Fatal(err)
	}
	l, err := (&runbooks.Library{}).LoadFile(p, cluster)
	if err != nil {
		t.Fatal(err)
	}
	params, err := runbooks.ResolveParams(l.Runbook, nil, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return Admit(RunbookInput{Runbook: *l.Runbook, Params: params, Cluster: *cluster}, time.Now())
}
