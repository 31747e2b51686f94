package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/integration/teamlab"
	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

// startAuthzTeam runs the team install's Temporal as docker-compose.yml
// builds it (on PostgreSQL, mutual TLS), `kedge setup`, the Web UI and a
// worker with its worker certificate serving the lab's cluster; not the
// codec server or the webhook.
func startAuthzTeam(t *testing.T) *teamlab.Team {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := os.ReadFile(world.inventory)
	if err != nil {
		t.Fatal(err)
	}
	team, err := teamlab.Start(t.Context(), teamlab.Options{
		Repo: root, Dir: t.TempDir(), Kedge: world.kedgeBin, Net: "127.0.36",
		Skip:     []string{"kedge-codec", "kedge-webhook"},
		Progress: t.Logf,
		Setup: func(kd string) error {
			if err := os.MkdirAll(filepath.Join(kd, "clusters"), 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(kd, "clusters", "lab.yaml"), inv, 0o600)
		},
	})
	if err != nil {
		t.Fatalf("the team install did not start: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range []string{"temporal", "kedge-worker"} {
				t.Logf("%s", tailLines(team.Logs(s), 40))
			}
		}
		_ = team.Close()
	})
	return team
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// dialAs is a client of the team's Temporal with one of `kedge setup
// tls`'s certificates, and the codec key: the certificate is the only
// thing the callers below differ by.
func dialAs(t *testing.T, team *teamlab.Team, cert string) client.Client {
	t.Helper()
	kd := team.KedgeDir()
	pair, err := tls.LoadX509KeyPair(filepath.Join(kd, "tls", cert+".pem"), filepath.Join(kd, "tls", cert+".key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(kd, "tls", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cd, err := codec.Load(filepath.Join(kd, "codec.key"))
	if err != nil {
		t.Fatal(err)
	}
	opts := client.Options{HostPort: team.Address(), Namespace: "default",
		ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "temporal", MinVersion: tls.VersionTLS12}}}
	cd.Apply(&opts)
	c, err := client.Dial(opts)
	if err != nil {
		t.Fatalf("dial as %s: %v", cert, err)
	}
	t.Cleanup(c.Close)
	return c
}

// refused checks that a call was refused by the server's authorizer.
func refused(t *testing.T, who, what string, err error) {
	t.Helper()
	var denied *serviceerror.PermissionDenied
	if !errors.As(err, &denied) {
		t.Errorf("%s's certificate: %s: got %v, want PermissionDenied", who, what, err)
		return
	}
	t.Logf("%s's certificate: %s: refused (%s)", who, what, denied.Reason)
}

// The team's Temporal authorizes every call by the role of the caller's
// client certificate, tried as an attacker holding each kind of
// certificate (and the codec key: the certificate is what differs):
//   - an operator starts a runbook, which the team's worker polls with its
//     worker certificate and runs on a host;
//   - a viewer lists, describes, reads histories and queries, as does the
//     Web UI (whose certificate is a viewer's), but cannot start, signal,
//     update, cancel, reset or terminate, nor terminate through the UI;
//   - a worker cannot start, signal or terminate, nor poll a queue its
//     certificate does not name.
func TestTeamTemporalAuthorizesByRole(t *testing.T) {
	mainLane.join(t)
	team := startAuthzTeam(t)
	kd := team.KedgeDir()
	ctx := t.Context()

	// The operator runs a runbook; the team's worker runs it.
	const marker = "/tmp/kedge-authz"
	_, _ = labHost(t, "worker-2").Exec(ctx, "rm", "-f", marker)
	rb := writeRunbook(t, `apiVersion: kedge/v1
kind: Runbook
metadata: {name: authz}
steps:
  - id: touch
    action: host.run
    on: worker-2
    with: {command: "touch `+marker+`"}
`)
	tlsFlags := func(cert string) []string {
		return []string{"--tls-cert-path", filepath.Join(kd, "tls", cert+".pem"), "--tls-key-path", filepath.Join(kd, "tls", cert+".key"),
			"--tls-ca-path", filepath.Join(kd, "tls", "ca.pem"), "--tls-server-name", "temporal"}
	}
	var out, errOut strings.Builder
	args := append([]string{"kedge", "run", rb, "--inventory", world.inventory, "--address", team.Address(),
		"--codec-key", filepath.Join(kd, "codec.key"), "--wait", "--output", "json"}, tlsFlags("operator")...)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	code := starter.MainContext(cctx, args, starter.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	cancel()
	var p workflows.Progress
	if err := json.Unmarshal([]byte(out.String()), &p); err != nil || code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("the operator's run: exit %d (%v)\nstdout: %s\nstderr: %s", code, err, out.String(), errOut.String())
	}
	if _, err := labHost(t, "worker-2").Exec(ctx, "test", "-e", marker); err != nil {
		t.Fatalf("the operator's run, polled by the worker's certificate, did not touch the host: %v", err)
	}
	operator, viewer, wk := dialAs(t, team, "operator"), dialAs(t, team, "viewer"), dialAs(t, team, "kedge-worker")
	done := &commonpb.WorkflowExecution{WorkflowId: p.WorkflowID, RunId: p.RunID}
	if done.RunId == "" {
		d, err := operator.DescribeWorkflowExecution(ctx, p.WorkflowID, "")
		if err != nil {
			t.Fatalf("the operator's run %s: %v", p.WorkflowID, err)
		}
		done = d.WorkflowExecutionInfo.Execution
	}
	// A run parked on a queue no worker polls: what signals and
	// terminations aim at.
	parked, err := operator.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-parked", TaskQueue: "authz-nobody"}, workflows.RunbookWorkflow)
	if err != nil {
		t.Fatalf("the operator's start: %v", err)
	}

	// The Web UI shows runs with its viewer's certificate, and its
	// terminate button is refused.
	uiList, uiTerminate := webUI(t, team, parked.GetID())
	if !strings.Contains(uiList, parked.GetID()) {
		t.Errorf("the Web UI's list does not show %s: %.300s", parked.GetID(), uiList)
	}
	if !strings.Contains(uiTerminate, "PermissionDenied") && !strings.Contains(uiTerminate, "Request unauthorized") {
		t.Errorf("the Web UI's terminate: %.300s, want refused", uiTerminate)
	}

	// A viewer reads ...
	if l, err := viewer.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{}); err != nil || len(l.Executions) < 2 {
		t.Errorf("viewer's list: %v (%d runs)", err, len(l.GetExecutions()))
	}
	if _, err := viewer.DescribeWorkflowExecution(ctx, done.WorkflowId, done.RunId); err != nil {
		t.Errorf("viewer's describe: %v", err)
	}
	if it := viewer.GetWorkflowHistory(ctx, done.WorkflowId, done.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); !it.HasNext() {
		t.Error("viewer's history: no events")
	} else if _, err := it.Next(); err != nil {
		t.Errorf("viewer's history: %v", err)
	}
	if _, err := viewer.QueryWorkflow(ctx, done.WorkflowId, done.RunId, workflows.ProgressQuery); err != nil {
		t.Errorf("viewer's query: %v", err)
	}
	// ... and changes nothing.
	_, err = viewer.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-by-viewer", TaskQueue: "authz-nobody"}, workflows.RunbookWorkflow)
	refused(t, "viewer", "start", err)
	refused(t, "viewer", "signal", viewer.SignalWorkflow(ctx, parked.GetID(), "", "kedge-signal", nil))
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = viewer.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{WorkflowID: parked.GetID(), UpdateName: workflows.ApproveUpdate, WaitForStage: client.WorkflowUpdateStageAccepted})
	cancel()
	refused(t, "viewer", "update (approve)", err)
	refused(t, "viewer", "cancel", viewer.CancelWorkflow(ctx, parked.GetID(), ""))
	_, err = viewer.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{Namespace: "default",
		WorkflowExecution: done, WorkflowTaskFinishEventId: 3, RequestId: "authz-viewer-reset", Reason: "attacker"})
	refused(t, "viewer", "reset of a closed run", err)
	refused(t, "viewer", "terminate", viewer.TerminateWorkflow(ctx, parked.GetID(), "", "attacker"))

	// A worker works its queue (above) and nothing else.
	_, err = wk.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-by-worker", TaskQueue: "authz-nobody"}, workflows.RunbookWorkflow)
	refused(t, "worker", "start", err)
	refused(t, "worker", "signal", wk.SignalWorkflow(ctx, parked.GetID(), "", "kedge-signal", nil))
	refused(t, "worker", "terminate", wk.TerminateWorkflow(ctx, parked.GetID(), "", "attacker"))
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = wk.WorkflowService().PollWorkflowTaskQueue(pctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: "default",
		TaskQueue: &taskqueuepb.TaskQueue{Name: "authz-nobody", Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, Identity: "attacker"})
	cancel()
	refused(t, "worker", "poll of a queue its certificate does not name", err)

	// Nothing the viewer or the worker tried took effect: the parked run
	// runs on, the closed run was not reset (it is still the latest run of
	// its ID), no run was started by them.
	d, err := operator.DescribeWorkflowExecution(ctx, parked.GetID(), "")
	if err != nil || d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("the parked run: %v %v, want running", err, d.GetWorkflowExecutionInfo().GetStatus())
	}
	if d, err := operator.DescribeWorkflowExecution(ctx, done.WorkflowId, ""); err != nil || d.WorkflowExecutionInfo.Execution.RunId != done.RunId {
		t.Errorf("the closed run %s was reset: latest run %v (%v)", done.WorkflowId, d.GetWorkflowExecutionInfo().GetExecution(), err)
	}
	for _, id := range []string{"authz-by-viewer", "authz-by-worker"} {
		var nf *serviceerror.NotFound
		if _, err := operator.DescribeWorkflowExecution(ctx, id, ""); !errors.As(err, &nf) {
			t.Errorf("%s exists (%v)", id, err)
		}
	}
	// The operator may terminate.
	if err := operator.TerminateWorkflow(ctx, parked.GetID(), "", "authz test done"); err != nil {
		t.Errorf("the operator's terminate: %v", err)
	}

	// The server's audit lines name exactly the calls tried above: the
	// worker polling its queue, `kedge setup`, the Web UI's reads and the
	// server's own system worker were refused nothing.
	want := map[string]bool{
		"viewer StartWorkflowExecution": true, "viewer SignalWorkflowExecution": true, "viewer UpdateWorkflowExecution": true,
		"viewer RequestCancelWorkflowExecution": true, "viewer ResetWorkflowExecution": true, "viewer TerminateWorkflowExecution": true,
		"kedge-worker StartWorkflowExecution": true, "kedge-worker SignalWorkflowExecution": true,
		"kedge-worker TerminateWorkflowExecution": true, "kedge-worker PollWorkflowTaskQueue": true,
		"temporal-ui TerminateWorkflowExecution": true,
	}
	got := map[string]bool{}
	for _, line := range strings.Split(team.Logs("temporal"), "\n") {
		var l struct{ Msg, Subject, API string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "temporal: call refused" {
			got[l.Subject+" "+l.API] = true
			if !want[l.Subject+" "+l.API] {
				t.Errorf("the server refused a call no test made: %s", line)
			}
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("no audit line for the refused %s", k)
		}
	}
}

// webUI lists the workflows through the team's Web UI, reads what its
// pages read, and asks it to terminate a run, as a browser would (with the
// UI's CSRF token); it returns the list's and the termination's answers.
func webUI(t *testing.T, team *teamlab.Team, terminate string) (string, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	base := team.UIURL() + "/api/v1/namespaces/default/workflows"
	get := func() (int, string) {
		resp, err := hc.Get(base + "?query=" + url.QueryEscape("WorkflowId = '"+terminate+"'"))
		if err != nil {
			t.Fatalf("the Web UI: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var list string
	// The list reads the visibility store, which trails the start.
	eventually(t, 30*time.Second, "the run in the Web UI's list", func() bool {
		code, body := get()
		list = fmt.Sprintf("%d %s", code, body)
		return code == http.StatusOK && strings.Contains(body, terminate)
	})
	// What the UI's pages read: each answers.
	for _, page := range []string{"/api/v1/namespaces", "/api/v1/namespaces/default", "/api/v1/cluster-info", "/api/v1/system-info",
		"/api/v1/namespaces/default/search-attributes", "/api/v1/namespaces/default/workflow-count", "/api/v1/namespaces/default/schedules",
		"/api/v1/namespaces/default/batch-operations", "/api/v1/namespaces/default/workflows/" + terminate,
		"/api/v1/namespaces/default/workflows/" + terminate + "/history"} {
		resp, err := hc.Get(team.UIURL() + page)
		if err != nil {
			t.Fatalf("the Web UI: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the Web UI's %s: %d %.300s", page, resp.StatusCode, b)
		}
	}
	u, _ := url.Parse(team.UIURL())
	var token string
	for _, c := range jar.Cookies(u) {
		if c.Name == "_csrf" {
			token = c.Value
		}
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/"+terminate+"/terminate", strings.NewReader(`{"reason":"attacker"}`))
	req.Header.Set("X-CSRF-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("the Web UI's terminate: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return list, fmt.Sprintf("%d %s", resp.StatusCode, b)
}
