package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

// kedge runs the CLI against the team's Temporal as the operator.
func kedge(args ...string) (string, string, int) {
	var out, errb strings.Builder
	full := append([]string{"kedge", args[0], "--address", world.team.Address(), "--codec-key", world.codecKey}, world.tlsFlags...)
	code := starter.Main(append(full, args[1:]...), starter.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

// startRollout starts a rolling kubelet swap over the cluster's workers.
func startRollout(t *testing.T, image string, maxUnavailable int) string {
	t.Helper()
	out, errOut, code := kedge("run", "kubelet-image-swap", "--inventory", world.inv, "--set", "image="+image, "--set", "nodes=workers",
		"--set", fmt.Sprintf("maxUnavailable=%d", maxUnavailable), "--set", "approveControllers=false", "--output", "json")
	if code != 0 {
		t.Fatalf("kedge run: exit %d: %s", code, errOut)
	}
	var started struct {
		WorkflowID string `json:"workflowId"`
	}
	if err := json.Unmarshal([]byte(out), &started); err != nil || started.WorkflowID == "" {
		t.Fatalf("kedge run printed %q (%v)", out, err)
	}
	return started.WorkflowID
}

func progress(id string) (workflows.Progress, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := world.client.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	var p workflows.Progress
	if err != nil || v.Get(&p) != nil {
		return p, false
	}
	return p, true
}

// waitClosed waits for a workflow to close and returns its error.
func waitClosed(t *testing.T, id string, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	for {
		err := world.client.GetWorkflow(ctx, id, "").Get(ctx, nil)
		if ctx.Err() != nil {
			p, _ := progress(id)
			return fmt.Errorf("still running after %s: %+v", within, p)
		}
		// A Temporal that is restarting ("Frontend is not healthy
		// yet") or away says nothing of the workflow: ask again.
		if !away(err) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// away says whether err means Temporal did not answer (yet), rather than
// answering about the workflow.
func away(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	switch {
	case err == nil:
		return false
	case errors.As(err, &unavailable), errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}

// closeLeftOpen terminates the workflows a failed chaos run left open
// since t0, so the next run starts on idle nodes.
func closeLeftOpen(t *testing.T, since time.Time) {
	t.Helper()
	resp, err := world.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("ExecutionStatus = 'Running' AND StartTime > '%s'", since.Format(time.RFC3339Nano)),
	})
	if err != nil {
		t.Logf("list open workflows: %v", err)
		return
	}
	for _, e := range resp.Executions {
		if err := world.client.TerminateWorkflow(t.Context(), e.Execution.WorkflowId, e.Execution.RunId, "chaos: left open by a failed run"); err != nil {
			t.Logf("terminate %s: %v", e.Execution.WorkflowId, err)
		}
	}
}

// runsSince lists the runs of a workflow ID started since t0, from the
// visibility store (PostgreSQL).
func runsSince(t *testing.T, id string, since time.Time) ([]string, error) {
	t.Helper()
	resp, err := world.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s' AND StartTime > '%s'", id, since.Format(time.RFC3339Nano)),
	})
	if err != nil {
		return nil, err
	}
	var runs []string
	for _, e := range resp.Executions {
		runs = append(runs, e.Execution.RunId)
	}
	return runs, nil
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

const kubeletLog = "/var/log/units/kubelet.service.log"

// kubeletMarks are the lengths of the nodes' kubelet logs: what a run
// adds is read after them.
func kubeletMarks() []int {
	marks := make([]int, len(world.workers))
	for i := range world.workers {
		data, _ := world.lab.Hosts[i+1].ReadFile(kubeletLog)
		marks[i] = len(data)
	}
	return marks
}

// startsSince counts the kubelet starts at version on node i since mark.
func startsSince(i int, marks []int, version string) int {
	log, _ := world.lab.Hosts[i+1].ReadFile(kubeletLog)
	if marks[i] > len(log) {
		return 0
	}
	return strings.Count(string(log[marks[i]:]), "kubelet simulator "+version+" starting")
}

// swapped counts the nodes whose kubelet started at version since marks.
func swapped(marks []int, version string) int {
	n := 0
	for i := range world.workers {
		if startsSince(i, marks, version) > 0 {
			n++
		}
	}
	return n
}

func versionOf(image string) string { return image[strings.LastIndex(image, ":")+1:] }

// swapViolations checks a swap to image from the hosts and the API
// server, not from Kedge's report: every node on the new kubelet and
// schedulable, its drop-in naming the image, one node runbook per node
// since the run started, the kubelet started on the new image (since
// marks) at least once and at most as often as the restart step ran (and
// once more for each time the node's units were started as at a boot,
// rebooted[i]), and no workflow of the run left open.
func swapViolations(t *testing.T, image string, since time.Time, marks []int, rebooted map[int]int) []string {
	t.Helper()
	var out []string
	version := versionOf(image)
	for i, w := range world.workers {
		h := world.lab.Hosts[i+1]
		n, err := world.cp.Client.CoreV1().Nodes().Get(t.Context(), w, metav1.GetOptions{})
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: %v", w, err))
		case n.Status.NodeInfo.KubeletVersion != version || n.Spec.Unschedulable:
			out = append(out, fmt.Sprintf("%s: kubelet %s, unschedulable %v; want %s, schedulable", w, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable, version))
		}
		if dropin, _ := h.ReadFile("/etc/systemd/system/kubelet.service.d/10-image.conf"); !strings.Contains(string(dropin), image) {
			out = append(out, fmt.Sprintf("%s: drop-in %q", w, dropin))
		}
		id := workflows.NodeWorkflowID("twenty", w)
		// Visibility (PostgreSQL) is written after the run itself and
		// lags behind after a restart: a run not listed yet is waited
		// for; one listed twice is a second run.
		var runs []string
		untilLag(func() bool { runs, err = runsSince(t, id, since); return err == nil && len(runs) > 0 })
		if err != nil || len(runs) != 1 {
			out = append(out, fmt.Sprintf("%s: swapped by %d node runbooks (%v)", w, len(runs), err))
			continue
		}
		// A closed run answers through a worker replaying it: after a
		// Temporal restart the workers' pollers come back with a backoff.
		var p workflows.Progress
		if !untilLag(func() bool { var ok bool; p, ok = progress(id); return ok }) {
			out = append(out, fmt.Sprintf("%s: its node runbook does not answer in %s", w, visibilityLag))
			continue
		}
		attempts := -1
		for _, s := range p.Steps {
			if s.ID == "restart" {
				attempts = s.Attempts
			}
		}
		// At least once, and never more often than the restart step
		// ran: an attempt cut short by a fault may or may not have got
		// as far as the restart.
		if starts := startsSince(i, marks, version); starts < 1 || starts > attempts+rebooted[i] {
			out = append(out, fmt.Sprintf("%s: kubelet started %d times on the new image, the restart step ran %d times, the node booted %d times", w, starts, attempts, rebooted[i]))
		}
	}
	resp, err := world.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("ExecutionStatus = 'Running' AND StartTime > '%s'", since.Format(time.RFC3339Nano)),
	})
	if err != nil {
		out = append(out, fmt.Sprintf("list open workflows: %v", err))
	} else if ids := stillOpen(t, resp.Executions); len(ids) > 0 {
		out = append(out, fmt.Sprintf("workflows left open: %s", strings.Join(ids, ", ")))
	}
	return out
}

// visibilityLag bounds how long, after a PostgreSQL or Temporal restart,
// the visibility store may trail the runs themselves and a closed run
// may take to answer a query.
const visibilityLag = 30 * time.Second

// stillOpen keeps, of executions the visibility store lists as running,
// those the run itself says are: visibility may still show a run that
// has closed. Each is asked again until visibilityLag has passed.
func stillOpen(t *testing.T, listed []*workflowpb.WorkflowExecutionInfo) []string {
	t.Helper()
	var open []string
	for _, e := range listed {
		id, run := e.Execution.WorkflowId, e.Execution.RunId
		closed := untilLag(func() bool {
			d, err := world.client.DescribeWorkflowExecution(t.Context(), id, run)
			return err == nil && d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		})
		if !closed {
			open = append(open, id)
		}
	}
	return open
}

// untilLag asks f every half second until it says yes or visibilityLag
// has passed, and returns its last answer.
func untilLag(f func() bool) bool {
	for wait := time.Now().Add(visibilityLag); ; time.Sleep(500 * time.Millisecond) {
		if f() {
			return true
		}
		if time.Now().After(wait) {
			return false
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logsOnFailure prints the services' logs when the test failed.
func logsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range []string{"temporal", "kedge-worker", "kedge-setup"} {
				t.Logf("%s", lastLines(world.team.Logs(s), 60))
			}
		}
	})
}
