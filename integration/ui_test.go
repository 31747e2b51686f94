package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/durationpb"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

// The Web UI reads a run through the frontend's WorkflowService: the list
// (ListWorkflowExecutions with a visibility query), a run's page
// (DescribeWorkflowExecution: summary and details), its timeline
// (GetWorkflowExecutionHistory: each event's user metadata), and the
// Queries tab (the __temporal_workflow_metadata query, then the query
// picked). These tests ask those same calls.

const uiNode = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: ui-node}
params:
  node: {type: string, required: true}
steps:
  - id: write
    action: host.write-file
    on: ${ params.node }
    with: {path: /etc/kedge-ui/node.conf, content: "node=${ params.node }\n"}
  - id: restart
    needs: [write]
    action: host.run
    on: ${ params.node }
    with: {command: "sleep 1; echo restarted >> /var/lib/kedge-ui-restarts"}
`

const uiSwap = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: ui-swap, description: "Rolls a config over every node, then waits for a person."}
params:
  nodes: {type: nodes, default: all}
  token: {type: string, secret: true, default: "ui-secret-token-value"}
steps:
  - id: config
    action: host.write-file
    on: ${ params.nodes }
    with: {path: /etc/kedge-ui/cluster.conf, content: "token=${ params.token }\n"}
  - id: nodes
    needs: [config]
    runbook: ui-node
    rollout: {over: "${ params.nodes }", maxUnavailable: 2}
    with: {node: "${ item }"}
  - id: gate
    needs: [nodes]
    approval: {prompt: "Looks right?"}
`

// listIDs runs a visibility query as the UI's list does and returns the
// workflow IDs it finds.
func listIDs(t *testing.T, query string) []string {
	t.Helper()
	resp, err := world.client.WorkflowService().ListWorkflowExecutions(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: world.srv.Namespace(), Query: query, PageSize: 1000,
	})
	if err != nil {
		t.Fatalf("list %q: %v", query, err)
	}
	var ids []string
	for _, e := range resp.Executions {
		ids = append(ids, e.Execution.WorkflowId)
	}
	slices.Sort(ids)
	return ids
}

// decode opens a payload the way the UI does through the codec server.
func decode(t *testing.T, p *commonpb.Payload) string {
	t.Helper()
	if p == nil {
		return ""
	}
	if enc := string(p.Metadata["encoding"]); enc != "binary/encrypted" {
		t.Errorf("a user metadata payload is stored as %q, not sealed by the codec", enc)
	}
	var s string
	if err := world.codec.DataConverter().FromPayload(p, &s); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return s
}

func history(t *testing.T, id string) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	var token []byte
	for {
		resp, err := world.client.WorkflowService().GetWorkflowExecutionHistory(t.Context(), &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: world.srv.Namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: id}, NextPageToken: token,
		})
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		events = append(events, resp.History.Events...)
		if token = resp.NextPageToken; len(token) == 0 {
			return events
		}
	}
}

// TestUIReadsLikeTheRunbookThroughApproval runs a rollout with an approval
// on the lab and reads it back as the Web UI does. (Its name holds
// "Approval" so `make record-histories` records its histories too.)
func TestUIReadsLikeTheRunbookThroughApproval(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	for name, body := range map[string]string{"ui-swap": uiSwap, "ui-node": uiNode} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Another cluster, for the list to tell apart.
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte(lab.Inventory("ui-other", world.lab, world.lab.KnownHostsFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	otherID := startRunInv(t, writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: ui-elsewhere}
steps:
  - {id: hello, action: host.run, on: controller-1, with: {command: "true"}}
`), other)

	id := startRun(t, filepath.Join(dir, "ui-swap.yaml"))
	if !strings.HasPrefix(id, "ui-swap/lab/") {
		t.Errorf("workflow ID %q does not read RUNBOOK/CLUSTER/...", id)
	}
	screen := watchInTerminal(t, id)
	nodeIDs := []string{"lab/node/controller-1", "lab/node/worker-1", "lab/node/worker-2"}
	rolloutID := id + "/nodes"

	// The list filters by status: the run shows as waiting for approval.
	eventually(t, 60*time.Second, "KedgeStatus = 'waiting-approval'", func() bool {
		return slices.Contains(listIDs(t, "KedgeCluster = 'lab' AND KedgeStatus = 'waiting-approval'"), id)
	})
	// The Queries tab: the workflow lists its queries; progress needs no
	// argument; the current details show the gate.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v, err := world.client.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
	if err != nil {
		t.Fatal(err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatal(err)
	}
	var queries []string
	for _, q := range md.GetDefinition().GetQueryDefinitions() {
		queries = append(queries, q.GetName())
	}
	if !slices.Contains(queries, workflows.ProgressQuery) {
		t.Errorf("the Queries tab lists %v, not %s", queries, workflows.ProgressQuery)
	}
	if d := md.GetCurrentDetails(); !strings.Contains(d, "⏸ `gate` waiting") || !strings.Contains(d, "✓ `nodes` succeeded — rollout of ui-node") {
		t.Errorf("current details while waiting:\n%s", d)
	}
	if p, err := queryProgress(id); err != nil || step(t, p, "gate").State != workflows.StateWaiting {
		t.Errorf("progress query with no argument: %v %+v", err, p)
	}

	if _, errOut, code := kedge(t, "approve", id, "--step", "gate", "--by", "ui-test"); code != 0 {
		t.Fatalf("approve: %s", errOut)
	}
	if err := waitClosed(t, id, 60*time.Second); err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := waitClosed(t, otherID, 60*time.Second); err != nil {
		t.Fatalf("run on ui-other: %v", err)
	}

	// kedge watch in a terminal drew a bar per node, with the step it was
	// on, and ended with the run.
	out := screen()
	if !regexp.MustCompile(`worker-2\s+\[[=> ]+\]\s+1/2\s+running restart`).MatchString(out) {
		t.Errorf("kedge watch never showed worker-2 on its restart step:\n%s", out)
	}
	for _, want := range []string{"nodes", "3/3", id + " succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("kedge watch never showed %q:\n%s", want, out)
		}
	}

	// The list, filtered by cluster, runbook, node and status.
	eventually(t, 30*time.Second, "the list to settle", func() bool {
		return slices.Contains(listIDs(t, "KedgeStatus = 'succeeded' AND KedgeCluster = 'lab'"), id) &&
			slices.Contains(listIDs(t, "KedgeStatus = 'succeeded' AND KedgeCluster = 'ui-other'"), otherID)
	})
	onLab := listIDs(t, "KedgeCluster = 'lab'")
	for _, want := range append([]string{id, rolloutID}, nodeIDs...) {
		if !slices.Contains(onLab, want) {
			t.Errorf("KedgeCluster = 'lab' lacks %s: %v", want, onLab)
		}
	}
	if slices.Contains(onLab, otherID) {
		t.Errorf("KedgeCluster = 'lab' lists a run on ui-other")
	}
	if got := listIDs(t, "KedgeCluster = 'ui-other'"); !slices.Equal(got, []string{otherID}) {
		t.Errorf("KedgeCluster = 'ui-other' = %v", got)
	}
	if got := listIDs(t, "KedgeRunbook = 'ui-swap'"); !slices.Equal(got, []string{id, rolloutID}) {
		t.Errorf("KedgeRunbook = 'ui-swap' = %v, want the run and its rollout", got)
	}
	if got := listIDs(t, "KedgeNode = 'worker-2' AND KedgeRunbook = 'ui-node'"); !slices.Equal(got, []string{"lab/node/worker-2"}) {
		t.Errorf("KedgeNode = 'worker-2' = %v", got)
	}
	// Types a person can read.
	if got := listIDs(t, "WorkflowType = 'ui-node' AND KedgeCluster = 'lab'"); !slices.Equal(got, nodeIDs) {
		t.Errorf("WorkflowType = 'ui-node' = %v, want %v", got, nodeIDs)
	}
	if got := listIDs(t, "WorkflowType = 'ui-swap'"); !slices.Equal(got, []string{id}) {
		t.Errorf("WorkflowType = 'ui-swap' = %v", got)
	}

	// A run's page: summary and details, the secret param masked.
	desc, err := world.client.WorkflowService().DescribeWorkflowExecution(t.Context(), &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: world.srv.Namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: id},
	})
	if err != nil {
		t.Fatal(err)
	}
	um := desc.GetExecutionConfig().GetUserMetadata()
	if s := decode(t, um.GetSummary()); s != "ui-swap on lab" {
		t.Errorf("summary %q", s)
	}
	details := decode(t, um.GetDetails())
	for _, want := range []string{"Rolls a config over every node", "| token | (secret) |", "- `nodes` rollout of runbook ui-node (after config)"} {
		if !strings.Contains(details, want) {
			t.Errorf("details lack %q:\n%s", want, details)
		}
	}
	if strings.Contains(details, "ui-secret-token-value") {
		t.Error("the details show a secret param")
	}

	// The timeline: every activity says what it did and where.
	summaries := func(wid string) []string {
		var out []string
		for _, e := range history(t, wid) {
			switch e.EventType {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
				out = append(out, decode(t, e.GetUserMetadata().GetSummary()))
			}
		}
		return out
	}
	got := summaries(id)
	for _, want := range []string{
		"write /etc/kedge-ui/cluster.conf on controller-1 (step config)",
		"write /etc/kedge-ui/cluster.conf on worker-2 (step config)",
		"nodes: rollout of ui-node over 3 items on lab",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("the run's timeline lacks %q: %q", want, got)
		}
	}
	if got := summaries(rolloutID); !slices.Contains(got, "ui-node on worker-2 (lab, rollout step nodes)") {
		t.Errorf("the rollout's timeline: %q", got)
	}
	if got := summaries("lab/node/worker-2"); !slices.Equal(got, []string{
		"write /etc/kedge-ui/node.conf on worker-2 (step write)",
		"run a command on worker-2 (step restart)",
	}) {
		t.Errorf("worker-2's timeline: %q", got)
	}
	// KedgeStatus moved with the run, in its history.
	var statuses []string
	for _, e := range history(t, id) {
		// (GetVersion's marker upserts TemporalChangeVersion too.)
		if p := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()[searchattr.Status]; p != nil {
			var s string
			_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
			statuses = append(statuses, s)
		}
	}
	if want := []string{"waiting-approval", "running", "succeeded"}; !slices.Equal(statuses, want) {
		t.Errorf("KedgeStatus upserts %v, want %v", statuses, want)
	}

	// kedge list filters the same way.
	out, errOut, code := kedge(t, "list", "--cluster", "lab", "--runbook", "ui-swap", "--output", "json")
	var rows []struct {
		WorkflowID, Runbook, Cluster, KedgeStatus string
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
		t.Fatalf("kedge list: exit %d: %s %s", code, out, errOut)
	}
	if len(rows) != 1 || rows[0].WorkflowID != id || rows[0].Runbook != "ui-swap" || rows[0].Cluster != "lab" || rows[0].KedgeStatus != "succeeded" {
		t.Errorf("kedge list --cluster lab --runbook ui-swap = %+v", rows)
	}
	out, _, _ = kedge(t, "list", "--node", "worker-2", "--runbook", "ui-node")
	if !strings.Contains(out, "lab/node/worker-2") || !strings.Contains(out, "ui-node") {
		t.Errorf("kedge list --node worker-2:\n%s", out)
	}

	recordHistory(t, id, "ui-runbook")
	recordHistory(t, rolloutID, "ui-rollout")
	recordHistory(t, "lab/node/worker-2", "ui-node")
}

// watchInTerminal runs `kedge watch ID` with its stdout on a
// pseudo-terminal; the returned function waits for the watch to end and
// gives what the terminal showed, escape sequences removed.
func watchInTerminal(t *testing.T, id string) func() string {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 60, Col: 160}); err != nil {
		t.Fatal(err)
	}
	var shown bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&shown, ptmx) // ends with EIO once the tty is closed
	}()
	done := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		done <- starter.Main([]string{"kedge", "watch", id, "--address", world.srv.FrontendAddress()},
			starter.IO{In: strings.NewReader(""), Out: tty, Err: &errOut})
	}()
	return func() string {
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("kedge watch: exit %d: %s", code, errOut.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("kedge watch did not end with the run")
		}
		tty.Close()
		<-read
		ptmx.Close()
		return regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`).ReplaceAllString(shown.String(), "")
	}
}

// On a namespace without Kedge's search attributes, runs are refused with
// the command that fixes it; `kedge setup` adds them (the same code as
// `kedge dev`), after which runs start.
func TestUISetupRegistersSearchAttributes(t *testing.T) {
	mainLane.join(t)
	const ns = "ui-bare"
	_, err := world.client.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: ui-bare}
steps:
  - {id: hello, action: host.run, on: controller-1, with: {command: "true"}}
`)
	var errOut string
	var code int
	eventually(t, 20*time.Second, "the namespace to be known", func() bool {
		_, errOut, code = kedge(t, "run", rb, "--inventory", world.inventory, "--namespace", ns)
		return !strings.Contains(errOut, "not found")
	})
	if code != 1 || !strings.Contains(errOut, "run `kedge setup`") || !strings.Contains(errOut, "KedgeCluster") {
		t.Fatalf("run on a namespace without the attributes: exit %d: %s", code, errOut)
	}
	if _, errOut, code := kedge(t, "list", "--namespace", ns, "--cluster", "lab"); code != 1 || !strings.Contains(errOut, "kedge setup") {
		t.Errorf("list --cluster without the attributes: exit %d: %s", code, errOut)
	}
	addr := world.srv.FrontendAddress()
	out, _, code := kedge(t, "setup", "--address", addr, "--namespace", ns, "--check")
	if code != 1 || !strings.Contains(out, "lacks KedgeCluster, KedgeNode, KedgeRunbook, KedgeStatus") {
		t.Errorf("setup --check: exit %d: %s", code, out)
	}
	out, errOut, code = kedge(t, "setup", "--address", addr, "--namespace", ns, "--output", "json")
	var res struct{ Added []string }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Added) != 4 {
		t.Fatalf("setup: exit %d: %s %s", code, out, errOut)
	}
	if out, _, code := kedge(t, "setup", "--address", addr, "--namespace", ns); code != 0 || !strings.Contains(out, "has Kedge's search attributes") {
		t.Errorf("second setup: exit %d: %s", code, out)
	}
	// No worker polls this namespace: the run only has to be accepted.
	var started struct{ WorkflowID string }
	eventually(t, 20*time.Second, "a start to be accepted", func() bool {
		out, _, code = kedge(t, "run", rb, "--inventory", world.inventory, "--namespace", ns, "--output", "json")
		return code == 0 && json.Unmarshal([]byte(out), &started) == nil
	})
	_, err = world.client.WorkflowService().TerminateWorkflowExecution(t.Context(), &workflowservice.TerminateWorkflowExecutionRequest{
		Namespace: ns, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: started.WorkflowID}, Reason: "test over",
	})
	if err != nil {
		t.Error(err)
	}
}
