package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/chatops"
)

// helloOnce is hello-hook under a name of its own, so these tests count
// only their own runs.
var helloOnce = strings.Replace(helloHook, "{name: hello-hook}", "{name: hello-once}", 1)

// onceChat serves a webhook that may start hello-once.
func onceChat(t *testing.T) *chat {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello-once.yaml"), []byte(helloOnce), 0o644); err != nil {
		t.Fatal(err)
	}
	return startChat(t, world.inventory, dir)
}

var slackRunID = regexp.MustCompile("`(hello-once/lab[^`]*)`")

// slackStarted is the workflow ID a Slack reply names (hello-once/lab
// before workflow IDs named requests).
func slackStarted(t *testing.T, r reply) string {
	t.Helper()
	m := slackRunID.FindStringSubmatch(r.Text)
	if m == nil {
		t.Fatalf("the reply names no run: %d %s %s", r.status, r.outcome, r.raw)
	}
	return m[1]
}

// hookRequest is a signed POST /hooks/run as a CI system sends it.
func hookRequest(body, requestID string, at time.Time) request {
	h := http.Header{}
	h.Set(chatops.HeaderKey, "ci")
	h.Set(chatops.HeaderSig, chatops.SignHook([]byte(itHookKey), at, requestID, []byte(body)))
	if requestID != "" {
		h.Set(chatops.HeaderReq, requestID)
	}
	return request{path: "/hooks/run", ctype: "application/json", body: []byte(body), header: h}
}

func hookAnswer(t *testing.T, r reply) chatops.HookResponse {
	t.Helper()
	var resp chatops.HookResponse
	if err := json.Unmarshal([]byte(r.raw), &resp); err != nil || resp.WorkflowID == "" {
		t.Fatalf("hook answer %d %s: %v", r.status, r.raw, err)
	}
	return resp
}

// An attacker who captured a signed slash command replays it byte for
// byte within its five minutes, after another run of the same runbook
// started and ended (so the captured one is no longer the latest): it
// answers with the run it started, and starts nothing. Slack retrying
// the command (same trigger_id, signed anew) gets the same answer.
func TestOnceSlackReplayAfterAnotherRun(t *testing.T) {
	mainLane.join(t)
	c := onceChat(t)
	base := typeCount(t, "hello-once")
	first := c.slashRequest("U0SRE", "run hello-once lab message=first", "trigger-once-1", time.Now(), itSigningSecret)
	r := c.send(t, first)
	if r.outcome != "started" {
		t.Fatalf("the first command: %s %s", r.outcome, r.raw)
	}
	id1 := slackStarted(t, r)
	run1 := latestRun(t, id1)
	if err := waitClosed(t, id1, time.Minute); err != nil {
		t.Fatalf("the first run: %v", err)
	}
	r = c.slash(t, "U0SRE", "run hello-once lab message=second", "trigger-once-2")
	if r.outcome != "started" {
		t.Fatalf("the second command: %s %s", r.outcome, r.raw)
	}
	id2 := slackStarted(t, r)
	if err := waitClosed(t, id2, time.Minute); err != nil {
		t.Fatalf("the second run: %v", err)
	}
	typeRuns(t, "hello-once", base+2)

	replayed := c.send(t, first)
	if replayed.outcome != "existing" || !strings.Contains(replayed.Text, id1) || !strings.Contains(replayed.Text, run1) {
		t.Errorf("the first command replayed byte for byte after another run: %s %s, want existing with %s %s", replayed.outcome, replayed.raw, id1, run1)
	}
	retried := c.send(t, c.slashRequest("U0SRE", "run hello-once lab message=first", "trigger-once-1", time.Now(), itSigningSecret))
	if retried.outcome != "existing" || !strings.Contains(retried.Text, run1) {
		t.Errorf("the first command retried (signed anew) after another run: %s %s", retried.outcome, retried.raw)
	}
	typeRuns(t, "hello-once", base+2)
}

// The webhook process restarts (a new server, nothing in memory) and an
// attacker replays a signed request without a request ID that it had
// captured: it answers with the run the request started, and starts
// nothing.
func TestOnceHookReplayAfterRestart(t *testing.T) {
	mainLane.join(t)
	before := onceChat(t)
	base := typeCount(t, "hello-once")
	body := `{"runbook":"hello-once","inventory":"lab","params":{"message":"no-id"}}`
	req := hookRequest(body, "", time.Now())
	r := before.send(t, req)
	if r.status != http.StatusCreated {
		t.Fatalf("the first request: %d %s", r.status, r.raw)
	}
	first := hookAnswer(t, r)
	if err := waitClosed(t, first.WorkflowID, time.Minute); err != nil {
		t.Fatalf("the run: %v", err)
	}
	typeRuns(t, "hello-once", base+1)

	after := onceChat(t) // the restarted webhook
	r = after.send(t, req)
	if r.status != http.StatusOK {
		t.Fatalf("the request replayed after a restart: %d %s, want 200 existing", r.status, r.raw)
	}
	if got := hookAnswer(t, r); got.Status != "existing" || got.WorkflowID != first.WorkflowID || got.RunID != first.RunID {
		t.Errorf("the request replayed after a restart answers %+v, want the first run %+v", got, first)
	}
	typeRuns(t, "hello-once", base+1)
}

// A request ID starts one run, ever: sent again (signed anew) after
// another request's run started and ended, it answers with its own run.
func TestOnceRequestIDAfterAnotherRun(t *testing.T) {
	mainLane.join(t)
	c := onceChat(t)
	base := typeCount(t, "hello-once")
	body := `{"runbook":"hello-once","inventory":"lab","params":{"message":"ci"}}`
	r := c.send(t, hookRequest(body, "ci-once-1", time.Now()))
	if r.status != http.StatusCreated {
		t.Fatalf("ci-once-1: %d %s", r.status, r.raw)
	}
	first := hookAnswer(t, r)
	if err := waitClosed(t, first.WorkflowID, time.Minute); err != nil {
		t.Fatalf("ci-once-1's run: %v", err)
	}
	r = c.send(t, hookRequest(body, "ci-once-2", time.Now()))
	if r.status != http.StatusCreated {
		t.Fatalf("ci-once-2: %d %s", r.status, r.raw)
	}
	second := hookAnswer(t, r)
	if err := waitClosed(t, second.WorkflowID, time.Minute); err != nil {
		t.Fatalf("ci-once-2's run: %v", err)
	}
	typeRuns(t, "hello-once", base+2)

	r = c.send(t, hookRequest(body, "ci-once-1", time.Now().Add(time.Second)))
	if r.status != http.StatusOK {
		t.Fatalf("ci-once-1 again after ci-once-2's run: %d %s, want 200 existing", r.status, r.raw)
	}
	if got := hookAnswer(t, r); got.Status != "existing" || got.WorkflowID != first.WorkflowID || got.RunID != first.RunID {
		t.Errorf("ci-once-1 again answers %+v, want its own run %+v", got, first)
	}
	typeRuns(t, "hello-once", base+2)
}
