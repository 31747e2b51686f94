package integration

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"kedge.dev/kedge/chatops"
	"kedge.dev/kedge/internal/devserver"
	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

const (
	itSigningSecret = "it-slack-signing-secret-0123456789"
	itHookKey       = "it-ci-hook-key-0123456789abcdef"
	itUIURL         = "http://ui.test"
)

// posted is one message the webhook or a worker posted to a response_url.
type posted struct {
	Path            string            `json:"-"`
	At              time.Time         `json:"-"` // when it arrived
	Text            string            `json:"text"`
	ResponseType    string            `json:"response_type"`
	ReplaceOriginal bool              `json:"replace_original"`
	Blocks          []json.RawMessage `json:"blocks"`
}

// receiver stands in for Slack's response_url endpoints.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	posts []posted
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p posted
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("response_url got a body that is not JSON: %q", body)
		}
		p.Path, p.At = req.URL.Path, time.Now()
		r.mu.Lock()
		r.posts = append(r.posts, p)
		r.mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(r.Close)
	// The world's worker posts here too (chat.follow).
	world.responseURLs.Lock()
	world.responseURLs.prefixes = append(world.responseURLs.prefixes, r.URL+"/")
	world.responseURLs.Unlock()
	return r
}

func (r *receiver) all() []posted {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]posted(nil), r.posts...)
}

// wait returns the first post that matches.
func (r *receiver) wait(t *testing.T, within time.Duration, what string, match func(posted) bool) posted {
	t.Helper()
	var got posted
	eventually(t, within, what, func() bool {
		for _, p := range r.all() {
			if match(p) {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// resultHead is the head of chat.follow's result post, the last it posts
// for a run (its progress posts say "is running").
var resultHead = regexp.MustCompile(`^\S+ \*[^*]+\* on \*[^*]+\* (succeeded|failed|was cancelled)`)

// resultPost matches the result posted to path.
func resultPost(path string) func(posted) bool {
	return func(p posted) bool { return p.Path == path && resultHead.MatchString(p.Text) }
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// chat is a running `kedge webhook` against the world's Temporal and
// worker, and the receiver its response_urls point at.
type chat struct {
	url  string
	recv *receiver
	logs *syncLog
}

// startChat writes a ChatOps config for cluster lab (inventory inv) and
// serves it over real HTTP. U0SRE may start and approve anything;
// U0DEV may only start; the CI key may start hello-hook, hello-once and
// cluster-upgrade.
func startChat(t *testing.T, inv, runbookDir string) *chat {
	t.Helper()
	return startChatFor(t, "lab", inv, runbookDir)
}

// startChatFor is startChat for a cluster of another name (the name the
// inventory gives it).
func startChatFor(t *testing.T, cluster, inv, runbookDir string) *chat {
	t.Helper()
	workerServes(inv)
	dir := t.TempDir()
	recv := newReceiver(t)
	if err := os.WriteFile(filepath.Join(dir, "ci.key"), []byte(itHookKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgText := fmt.Sprintf(`apiVersion: kedge/v1
kind: ChatOps
clusters:
  %s: {inventory: %s}
runbookPath: [%s]
responseURLs: [%s/]
webhookKeys:
  ci: {secretFile: ci.key}
allow:
  - name: sre
    slackUsers: [U0SRE]
    clusters: ["*"]
    start: ["*"]
    approve: ["*"]
  - name: dev
    slackUsers: [U0DEV]
    clusters: [%s]
    start: [flaky-rollout]
  - name: lead
    slackUsers: [U0LEAD]
    clusters: [%s]
    restore: ["*"]
  - name: ci
    webhookKeys: [ci]
    clusters: [%s]
    start: [hello-hook, hello-once, cluster-upgrade]
`, cluster, inv, runbookDir, recv.URL, cluster, cluster, cluster)
	cfgPath := filepath.Join(dir, "chatops.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := chatops.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncLog{}
	srv := &chatops.Server{
		Config: cfg, Client: world.client, DataConverter: world.codec.DataConverter(), SigningSecret: itSigningSecret,
		UIURL: itUIURL, Namespace: world.srv.Namespace(), Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	}
	url := serveWebhook(t, srv, logs)
	t.Cleanup(func() {
		for _, secret := range []string{itSigningSecret, itHookKey, "v0="} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the webhook log holds a secret or a signature (%q)", secret)
			}
		}
	})
	return &chat{url: url, recv: recv, logs: logs}
}

// serveWebhook serves srv over real HTTP until the test ends, and returns
// its URL; logs (srv's log) is printed when the test failed.
func serveWebhook(t *testing.T, srv *chatops.Server, logs *syncLog) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("webhook log:\n%s", logs.String())
		}
	})
	return "http://" + ln.Addr().String()
}

// request is one signed request, kept so it can be replayed byte for byte.
type request struct {
	path   string
	ctype  string
	body   []byte
	header http.Header
}

// slackSigned signs body as Slack does: v0=HMAC-SHA256(secret, "v0:TS:BODY").
func slackSigned(path string, body []byte, secret string, at time.Time) request {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%s:%s", ts, body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	return request{path: path, ctype: "application/x-www-form-urlencoded", body: body, header: h}
}

type reply struct {
	status       int
	outcome      string
	ResponseType string `json:"response_type"`
	Text         string `json:"text"`
	raw          string
	took         time.Duration
}

func (c *chat) send(t *testing.T, r request) reply {
	t.Helper()
	req, err := http.NewRequest("POST", c.url+r.path, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = r.header.Clone()
	req.Header.Set("Content-Type", r.ctype)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := reply{status: resp.StatusCode, outcome: resp.Header.Get(chatops.HeaderOutcome), raw: string(b), took: time.Since(start)}
	_ = json.Unmarshal(b, &out)
	return out
}

func (c *chat) slashRequest(user, text, trigger string, at time.Time, secret string) request {
	names := map[string]string{"U0SRE": "sre", "U0DEV": "dev", "U0LEAD": "lead"}
	body := url.Values{
		"command": {"/kedge"}, "text": {text}, "user_id": {user}, "user_name": {names[user]},
		"channel_id": {"C0OPS"}, "team_id": {"T0IT"}, "trigger_id": {trigger},
		"response_url": {c.recv.URL + "/commands/" + trigger},
	}.Encode()
	return slackSigned("/slack/commands", []byte(body), secret, at)
}

func (c *chat) slash(t *testing.T, user, text, trigger string) reply {
	t.Helper()
	return c.send(t, c.slashRequest(user, text, trigger, time.Now(), itSigningSecret))
}

// clickRequest is Slack's block_actions payload for a click on a button.
func (c *chat) clickRequest(t *testing.T, user, actionID, value, actionTs string, at time.Time, secret string) request {
	t.Helper()
	names := map[string]string{"U0SRE": "sre", "U0DEV": "dev", "U0LEAD": "lead"}
	p, err := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]string{"id": user, "name": names[user]},
		"team": map[string]string{"id": "T0IT"}, "channel": map[string]string{"id": "C0OPS"},
		"container":    map[string]string{"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0OPS"},
		"trigger_id":   "click-" + actionTs,
		"response_url": c.recv.URL + "/actions/" + actionTs,
		"actions": []map[string]string{{"type": "button", "block_id": "kedge.decide", "action_id": actionID,
			"value": value, "action_ts": actionTs}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return slackSigned("/slack/interactive", []byte(url.Values{"payload": {string(p)}}.Encode()), secret, at)
}

// latestRun is the run ID of the newest run under id ("" when none).
func latestRun(t *testing.T, id string) string {
	t.Helper()
	d, err := world.client.DescribeWorkflowExecution(t.Context(), id, "")
	if err != nil {
		return ""
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// countRuns counts every run under a workflow ID (visibility can lag a
// moment behind a start: wait for want, then make sure it stays).
func chatRuns(t *testing.T, id string, want int) {
	t.Helper()
	count := func() int {
		resp, err := world.client.CountWorkflow(t.Context(), &workflowservice.CountWorkflowExecutionsRequest{Namespace: world.srv.Namespace(), Query: fmt.Sprintf("WorkflowId = '%s'", id)})
		if err != nil {
			return -1
		}
		return int(resp.GetCount())
	}
	eventually(t, 10*time.Second, fmt.Sprintf("%d runs of %s", want, id), func() bool { return count() == want })
	time.Sleep(500 * time.Millisecond)
	if n := count(); n != want {
		t.Errorf("%s has %d runs, want %d", id, n, want)
	}
}

// typeCount counts every run of a workflow type (a runbook runs under
// its name), whatever its workflow ID.
func typeCount(t *testing.T, workflowType string) int {
	t.Helper()
	resp, err := world.client.CountWorkflow(t.Context(), &workflowservice.CountWorkflowExecutionsRequest{Namespace: world.srv.Namespace(), Query: fmt.Sprintf("WorkflowType = '%s'", workflowType)})
	if err != nil {
		t.Fatalf("count runs of %s: %v", workflowType, err)
	}
	return int(resp.GetCount())
}

// typeRuns waits for want runs of a workflow type, as chatRuns does.
func typeRuns(t *testing.T, workflowType string, want int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d runs of %s", want, workflowType), func() bool { return typeCount(t, workflowType) == want })
	time.Sleep(500 * time.Millisecond)
	if n := typeCount(t, workflowType); n != want {
		t.Errorf("%s ran %d times, want %d", workflowType, n, want)
	}
}

// startedID is the workflow ID a Slack reply names: RUNBOOK/CLUSTER/...,
// derived from the request.
func startedID(t *testing.T, r reply, runbook string) string {
	t.Helper()
	return startedIDOn(t, r, runbook, "lab")
}

// startedIDOn is startedID for a cluster of another name.
func startedIDOn(t *testing.T, r reply, runbook, cluster string) string {
	t.Helper()
	m := regexp.MustCompile("`(" + regexp.QuoteMeta(runbook+"/"+cluster+"/") + "[^`]+)`").FindStringSubmatch(r.Text)
	if m == nil {
		t.Fatalf("the reply names no run of %s: %d %s %s", runbook, r.status, r.outcome, r.raw)
	}
	return m[1]
}

// decisions lists the decisions a workflow accepted through updates, from
// its history (sealed payloads opened with the world's key).
func decisions(t *testing.T, id string) []workflows.Decision {
	t.Helper()
	var out []workflows.Decision
	iter := world.client.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
			var d workflows.Decision
			if err := world.codec.DataConverter().FromPayloads(a.GetAcceptedRequest().GetInput().GetArgs(), &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// A signed `/kedge swap-kubelet` against a lab cluster joined to a real
// control plane: the reply (with the Web UI link) comes within Slack's
// 3 s, retries and a second swap start nothing, and the worker posts the
// result to the response_url.
func TestWebhookSlackSwapKubeletOnALabCluster(t *testing.T) {
	mainLane.join(t)
	cp, inv := kubeLab(t)
	freshNodes(t, cp, "worker-1", "worker-2")
	c := startChat(t, inv, t.TempDir())
	text := "swap-kubelet lab image=quay.io/poseidon/kubelet:v1.35.5 max-unavailable=2 nodes=workers"

	first := c.slashRequest("U0SRE", text, "trigger-swap-1", time.Now(), itSigningSecret)
	r := c.send(t, first)
	if r.status != 200 || r.outcome != "started" || r.ResponseType != "in_channel" {
		t.Fatalf("swap-kubelet: %d %s %s", r.status, r.outcome, r.raw)
	}
	id := startedID(t, r, "kubelet-image-swap")
	if r.took > 3*time.Second {
		t.Errorf("the reply took %s; Slack gives up after 3s", r.took)
	}
	runID := latestRun(t, id)
	link := itUIURL + "/namespaces/" + world.srv.Namespace() + "/workflows/" + url.PathEscape(id) + "/" + runID + "/history"
	for _, want := range []string{"`" + id + "`", link, "started *kubelet-image-swap* on *lab*", "maxUnavailable=2"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("the reply lacks %q: %s", want, r.Text)
		}
	}
	t.Logf("reply in %s: %s", r.took, r.Text)

	// Slack retrying the same command (same trigger_id, signed anew) gets
	// the run it started; a second swap is refused with a link to it; a
	// forged and a stale request are refused before anything is read.
	again := c.send(t, c.slashRequest("U0SRE", text, "trigger-swap-1", time.Now(), itSigningSecret))
	if again.outcome != "existing" || !strings.Contains(again.Text, link) {
		t.Errorf("the retried command: %s %s", again.outcome, again.raw)
	}
	second := c.slash(t, "U0SRE", "swap-kubelet lab image=quay.io/poseidon/kubelet:v1.35.6", "trigger-swap-2")
	if second.outcome != "conflict" || second.ResponseType != "ephemeral" ||
		!strings.Contains(second.Text, "kubelet-image-swap is already running on lab (started by slack:sre (U0SRE))") || !strings.Contains(second.Text, link) {
		t.Errorf("the second swap: %s %s", second.outcome, second.raw)
	}
	if f := c.send(t, c.slashRequest("U0SRE", text, "trigger-swap-3", time.Now(), "forged-secret")); f.status != 401 {
		t.Errorf("a forged command: %d %s", f.status, f.raw)
	}
	if s := c.send(t, c.slashRequest("U0SRE", text, "trigger-swap-4", time.Now().Add(-10*time.Minute), itSigningSecret)); s.status != 401 || !strings.Contains(s.raw, "stale") {
		t.Errorf("a stale command: %d %s", s.status, s.raw)
	}
	if rp := c.send(t, first); rp.outcome != "existing" {
		t.Errorf("the first request replayed byte for byte: %s %s", rp.outcome, rp.raw)
	}
	chatRuns(t, id, 1)
	chatRuns(t, chatops.FollowID(id, runID), 1)
	// Started like `kedge run` starts it: the Web UI's list filters it by cluster.
	eventually(t, 10*time.Second, "the run listed under "+searchattr.Cluster+" = lab", func() bool {
		resp, err := world.client.CountWorkflow(t.Context(), &workflowservice.CountWorkflowExecutionsRequest{Namespace: world.srv.Namespace(),
			Query: fmt.Sprintf("%s = 'lab' AND WorkflowId = '%s' AND WorkflowType = 'kubelet-image-swap'", searchattr.Cluster, id)})
		return err == nil && resp.GetCount() == 1
	})

	// The worker's chat.follow posts the result to the command's response_url.
	final := c.recv.wait(t, 3*time.Minute, "the result posted to the response_url", resultPost("/commands/trigger-swap-1"))
	t.Logf("posted: %s", final.Text)
	for _, want := range []string{":white_check_mark: *kubelet-image-swap* on *lab* succeeded", "`workers` succeeded — 2 items: 2 succeeded", link, "started by slack:sre (U0SRE)"} {
		if !strings.Contains(final.Text, want) {
			t.Errorf("the result lacks %q: %s", want, final.Text)
		}
	}
	if err := waitClosed(t, id, time.Minute); err != nil {
		t.Fatalf("the swap failed: %v", err)
	}
	if v := kubeletVersions(t, cp, []string{"worker-1", "worker-2"}); v["worker-1"] != "v1.35.5" || v["worker-2"] != "v1.35.5" {
		t.Errorf("after the swap: %v", v)
	}
	for _, p := range c.recv.all() {
		if p.Path != "/commands/trigger-swap-1" {
			t.Errorf("something was posted for a request that started nothing: %s %s", p.Path, p.Text)
		}
	}

	// status and list read the run back.
	st := c.slash(t, "U0SRE", "status "+id, "trigger-status")
	if st.outcome != "ok" || !strings.Contains(st.Text, "*kubelet-image-swap* on *lab*: succeeded") {
		t.Errorf("status: %s %s", st.outcome, st.raw)
	}
	eventually(t, 10*time.Second, "list to show the swap", func() bool {
		l := c.slash(t, "U0SRE", "list lab", "trigger-list")
		return strings.Contains(l.Text, "`"+id+"` completed")
	})
	// Once it has ended, a new swap may start.
	n := c.slash(t, "U0SRE", "swap-kubelet lab image=quay.io/poseidon/kubelet:v1.35.4 nodes=workers max-unavailable=2", "trigger-swap-5")
	if n.outcome != "started" {
		t.Fatalf("a swap after the first ended: %s %s", n.outcome, n.raw)
	}
	if back := startedID(t, n, "kubelet-image-swap"); back == id {
		t.Errorf("the second swap runs under the first one's ID %s", id)
	} else if err := waitClosed(t, back, 3*time.Minute); err != nil {
		t.Fatalf("the swap back failed: %v", err)
	}
	if p := c.recv.wait(t, time.Minute, "the second swap's result", resultPost("/commands/trigger-swap-5")); !strings.Contains(p.Text, " succeeded") {
		t.Errorf("the second swap: %s", p.Text)
	}
}

// button is one button of a posted message's action block.
type button struct {
	ActionID string          `json:"action_id"`
	Value    string          `json:"value"`
	Confirm  json.RawMessage `json:"confirm"`
}

// buttonsOf is the buttons of a message posted with a text block and an
// action block; it fails the test unless there are n.
func buttonsOf(t *testing.T, p posted, n int) []button {
	t.Helper()
	var actions struct {
		Elements []button `json:"elements"`
	}
	if len(p.Blocks) != 2 {
		t.Fatalf("%d blocks, want a text and an action block: %+v", len(p.Blocks), p)
	}
	if err := json.Unmarshal(p.Blocks[1], &actions); err != nil || len(actions.Elements) != n {
		t.Fatalf("buttons: %v %s, want %d", err, p.Blocks[1], n)
	}
	return actions.Elements
}

const flakyNode = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: flaky-node}
params:
  node: {type: string, required: true}
steps:
  - id: work
    action: host.run
    on: ${ params.node }
    retry: {maxAttempts: 1}
    with: {command: "test \"$NODE\" != worker-1", env: {NODE: "${ params.node }"}}
`

const flakyRollout = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: flaky-rollout}
params:
  nodes: {type: list, required: true}
steps:
  - id: nodes
    runbook: flaky-node
    rollout:
      over: ${ params.nodes }
      maxUnavailable: 1
      failureBudget: 0
    with: {node: "${ item }"}
`

// A rollout paused at its failure budget posts Continue / Abort buttons; a
// click resumes it with the Slack user recorded as the approver; forged,
// stale, unauthorized and replayed clicks change nothing.
func TestWebhookContinueButtonResumesAPausedRollout(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	for name, text := range map[string]string{"flaky-node.yaml": flakyNode, "flaky-rollout.yaml": flakyRollout} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := startChat(t, world.inventory, dir)
	r := c.slash(t, "U0DEV", "run flaky-rollout lab nodes=worker-1,worker-2", "trigger-flaky")
	if r.outcome != "started" || r.took > 3*time.Second {
		t.Fatalf("run flaky-rollout: %s in %s: %s", r.outcome, r.took, r.raw)
	}
	id := startedID(t, r, "flaky-rollout")
	ro := rolloutOf(t, id, "nodes")

	// The pause is posted with buttons that carry it.
	pause := c.recv.wait(t, time.Minute, "the pause posted with buttons", func(p posted) bool { return len(p.Blocks) == 2 })
	if !strings.Contains(pause.Text, "*flaky-rollout* on *lab* is paused") || !strings.Contains(pause.Text, "worker-1") {
		t.Errorf("pause message: %s", pause.Text)
	}
	buttons := buttonsOf(t, pause, 2)
	value := buttons[0].Value
	if buttons[0].ActionID != slackmsg.ActionContinue || buttons[1].ActionID != slackmsg.ActionAbort {
		t.Fatalf("buttons: %+v", buttons)
	}
	stillPaused := func(when string) {
		t.Helper()
		p, ok := progressOf(t, ro)
		if !ok || p.State != workflows.StateWaiting {
			t.Fatalf("%s: the rollout is %s, want it still paused", when, p.State)
		}
		if d := decisions(t, ro); len(d) != 0 {
			t.Fatalf("%s: the rollout took decisions %+v", when, d)
		}
	}
	eventually(t, 30*time.Second, "the rollout to pause", func() bool {
		p, ok := progressOf(t, ro)
		return ok && p.State == workflows.StateWaiting
	})

	if f := c.send(t, c.clickRequest(t, "U0SRE", slackmsg.ActionContinue, value, "1700000001.1", time.Now(), "forged-secret")); f.status != 401 {
		t.Errorf("a forged click: %d %s", f.status, f.raw)
	}
	if s := c.send(t, c.clickRequest(t, "U0SRE", slackmsg.ActionContinue, value, "1700000001.2", time.Now().Add(-6*time.Minute), itSigningSecret)); s.status != 401 {
		t.Errorf("a stale click: %d %s", s.status, s.raw)
	}
	if d := c.send(t, c.clickRequest(t, "U0DEV", slackmsg.ActionContinue, value, "1700000001.3", time.Now(), itSigningSecret)); d.outcome != "refused" ||
		!strings.Contains(d.Text, "not allowed: slack:dev (U0DEV) may not approve flaky-rollout on lab") {
		t.Errorf("a click by someone who may not approve: %s %s", d.outcome, d.raw)
	}
	var tampered slackmsg.ButtonValue
	_ = json.Unmarshal([]byte(value), &tampered)
	tampered.Seq = 7 // a button of another pause
	tv, _ := json.Marshal(tampered)
	if o := c.send(t, c.clickRequest(t, "U0SRE", slackmsg.ActionContinue, string(tv), "1700000001.4", time.Now(), itSigningSecret)); o.outcome != "conflict" {
		t.Errorf("a button of another pause: %s %s", o.outcome, o.raw)
	}
	// A Restore click, even by someone who may restore, on a rollout whose
	// runbook has no restore steps.
	if o := c.send(t, c.clickRequest(t, "U0LEAD", slackmsg.ActionRestore, value, "1700000001.5", time.Now(), itSigningSecret)); o.outcome != "conflict" ||
		!strings.Contains(o.Text, "offers no restore") {
		t.Errorf("a Restore click on a rollout without restore steps: %s %s", o.outcome, o.raw)
	}
	stillPaused("after forged, stale, unauthorized, stale-button and restore clicks")

	click := c.clickRequest(t, "U0SRE", slackmsg.ActionContinue, value, "1700000002.5", time.Now(), itSigningSecret)
	ok := c.send(t, click)
	if ok.status != 200 || ok.outcome != "decided" || ok.took > 3*time.Second {
		t.Fatalf("the Continue click: %d %s in %s: %s", ok.status, ok.outcome, ok.took, ok.raw)
	}
	ack := c.recv.wait(t, 10*time.Second, "the click acknowledged on its response_url", func(p posted) bool {
		return p.Path == "/actions/1700000002.5"
	})
	if !ack.ReplaceOriginal || !strings.Contains(ack.Text, "<@U0SRE> continued `nodes` of *flaky-rollout* on *lab*") {
		t.Errorf("acknowledgement: %+v", ack)
	}
	// The same click again (Slack retrying, or someone replaying it within
	// the five minutes) decides nothing more.
	if again := c.send(t, click); again.outcome != "conflict" || !strings.Contains(again.Text, "no longer waits for this decision") {
		t.Errorf("the replayed click: %s %s", again.outcome, again.raw)
	}
	if err := waitClosed(t, id, time.Minute); err != nil {
		t.Fatalf("the run failed after Continue: %v", err)
	}
	d := decisions(t, ro)
	if len(d) != 1 || d[0].Decision != workflows.DecisionContinue || d[0].By != "slack:sre (U0SRE)" {
		t.Errorf("the rollout's history records %+v, want one continue by slack:sre (U0SRE)", d)
	}
	final := c.recv.wait(t, time.Minute, "the result posted", resultPost("/commands/trigger-flaky"))
	if !strings.Contains(final.Text, "`nodes` succeeded — 2 items: 1 succeeded, 1 failed") {
		t.Errorf("result: %s", final.Text)
	}
	for _, line := range []string{`"subject":"slack:sre (U0SRE)","action":"continue","outcome":"allowed"`,
		`"subject":"slack:dev (U0DEV)","action":"continue","outcome":"refused"`} {
		if !strings.Contains(c.logs.String(), line) {
			t.Errorf("no audit line with %s", line)
		}
	}
}

const flakyRestore = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: flaky-restore}
params:
  nodes: {type: list, required: true}
steps:
  - id: nodes
    runbook: flaky-node
    rollout:
      over: ${ params.nodes }
      maxUnavailable: 1
      failureBudget: 0
    with: {node: "${ item }"}
  - id: put-back
    phase: restore
    action: host.run
    on: controller-1
    with: {command: "true"}
`

// A pause of a runbook with restore steps offers Restore beside Continue
// and Abort. Approving does not grant it: someone who may approve every
// runbook is refused, by button and by /kedge restore, and nothing is
// decided; a rule that grants restore makes the rollout abort and the
// runbook run its restore steps, with the Slack user recorded.
func TestWebhookRestoreButtonNeedsItsOwnGrant(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	for name, text := range map[string]string{"flaky-node.yaml": flakyNode, "flaky-restore.yaml": flakyRestore} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := startChat(t, world.inventory, dir)
	r := c.slash(t, "U0SRE", "run flaky-restore lab nodes=worker-1,worker-2", "trigger-flaky-restore")
	if r.outcome != "started" {
		t.Fatalf("run flaky-restore: %s: %s", r.outcome, r.raw)
	}
	id := startedID(t, r, "flaky-restore")
	ro := rolloutOf(t, id, "nodes")
	pause := c.recv.wait(t, time.Minute, "the pause posted with buttons", func(p posted) bool { return len(p.Blocks) == 2 })
	restore := buttonsOf(t, pause, 3)[2]
	if restore.ActionID != slackmsg.ActionRestore || len(restore.Confirm) == 0 {
		t.Fatalf("the third button: %+v", restore)
	}
	eventually(t, 30*time.Second, "the rollout to pause", func() bool {
		p, ok := progressOf(t, ro)
		return ok && p.State == workflows.StateWaiting
	})

	if d := c.send(t, c.clickRequest(t, "U0SRE", slackmsg.ActionRestore, restore.Value, "1700000200.1", time.Now(), itSigningSecret)); d.outcome != "refused" ||
		!strings.Contains(d.Text, "not allowed: slack:sre (U0SRE) may not restore flaky-restore on lab") {
		t.Errorf("a Restore click by someone who may approve but not restore: %s %s", d.outcome, d.raw)
	}
	if d := c.slash(t, "U0SRE", "restore "+id, "trigger-restore-sre"); d.outcome != "refused" ||
		!strings.Contains(d.Text, "may not restore flaky-restore on lab") {
		t.Errorf("/kedge restore by someone who may approve but not restore: %s %s", d.outcome, d.raw)
	}
	if p, ok := progressOf(t, ro); !ok || p.State != workflows.StateWaiting || len(decisions(t, ro)) != 0 {
		t.Fatalf("after refused restores the rollout is %s with decisions %+v, want it still paused", p.State, decisions(t, ro))
	}

	ok := c.send(t, c.clickRequest(t, "U0LEAD", slackmsg.ActionRestore, restore.Value, "1700000200.2", time.Now(), itSigningSecret))
	if ok.outcome != "decided" {
		t.Fatalf("the Restore click: %s %s", ok.outcome, ok.raw)
	}
	ack := c.recv.wait(t, 10*time.Second, "the click acknowledged", func(p posted) bool { return p.Path == "/actions/1700000200.2" })
	if !strings.Contains(ack.Text, "<@U0LEAD> asked a restore at `nodes` of *flaky-restore* on *lab*") {
		t.Errorf("acknowledgement: %s", ack.Text)
	}
	err := waitClosed(t, id, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "restore asked by slack:lead (U0LEAD): restored (put-back)") {
		t.Errorf("the run ended with %v, want the restore steps run for slack:lead (U0LEAD)", err)
	}
	if d := decisions(t, ro); len(d) != 1 || d[0].Decision != workflows.DecisionRestore || d[0].By != "slack:lead (U0LEAD)" {
		t.Errorf("the rollout's history records %+v, want one restore by slack:lead (U0LEAD)", d)
	}
	for _, line := range []string{`"subject":"slack:lead (U0LEAD)","action":"restore","outcome":"allowed"`,
		`"subject":"slack:sre (U0SRE)","action":"restore","outcome":"refused"`} {
		if !strings.Contains(c.logs.String(), line) {
			t.Errorf("no audit line with %s", line)
		}
	}
}

const helloHook = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: hello-hook}
params:
  message: {type: string, default: hi}
  count: {type: int, default: 1}
steps:
  - id: hello
    action: host.run
    on: controller-1
    with: {command: "echo \"$MESSAGE\" \"$COUNT\"", env: {MESSAGE: "${ params.message }", COUNT: "${ string(params.count) }"}}
`

// POST /hooks/run, signed with an HMAC key: one run per request ID, and
// nothing started for a forged, stale, unauthorized or ill-typed request.
func TestWebhookHooksRun(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello-hook.yaml"), []byte(helloHook), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startChat(t, world.inventory, dir)
	// A request signed for signedID and sent under sentID (the same, but
	// for the replay checks).
	resend := func(body, key, signedID, sentID string, at time.Time) reply {
		h := http.Header{}
		h.Set(chatops.HeaderKey, "ci")
		h.Set(chatops.HeaderSig, chatops.SignHook([]byte(key), at, signedID, []byte(body)))
		if sentID != "" {
			h.Set(chatops.HeaderReq, sentID)
		}
		return c.send(t, request{path: "/hooks/run", ctype: "application/json", body: []byte(body), header: h})
	}
	hook := func(body, key, requestID string, at time.Time) reply {
		return resend(body, key, requestID, requestID, at)
	}
	var resp chatops.HookResponse
	for _, bad := range []struct {
		name, body, key string
		at              time.Time
		status          int
		says            string
	}{
		{"forged", `{"runbook":"hello-hook","inventory":"lab"}`, "not-the-key-0123456789", time.Now(), 401, "bad signature"},
		{"stale", `{"runbook":"hello-hook","inventory":"lab"}`, itHookKey, time.Now().Add(-6 * time.Minute), 401, "stale"},
		{"not allowed", `{"runbook":"flaky-rollout","inventory":"lab","params":{"nodes":"worker-1"}}`, itHookKey, time.Now(), 403, "not allowed: webhook:ci may not start flaky-rollout on lab"},
		{"wrong type", `{"runbook":"hello-hook","inventory":"lab","params":{"count":"many"}}`, itHookKey, time.Now(), 422, `param count: \"many\" is not an integer`},
		{"another cluster", `{"runbook":"hello-hook","inventory":"mars"}`, itHookKey, time.Now(), 403, "may not start hello-hook on mars"},
	} {
		if r := hook(bad.body, bad.key, "", bad.at); r.status != bad.status || !strings.Contains(r.raw, bad.says) {
			t.Errorf("%s: %d %s, want %d with %q", bad.name, r.status, r.raw, bad.status, bad.says)
		}
	}
	typeRuns(t, "hello-hook", 0) // a refused request started nothing (only this test runs hello-hook on the world)
	body := `{"runbook":"hello-hook","inventory":"lab","params":{"message":"from-ci","count":3}}`
	r := hook(body, itHookKey, "ci-build-42", time.Now())
	if r.status != 201 || json.Unmarshal([]byte(r.raw), &resp) != nil || resp.Status != "started" || !strings.HasPrefix(resp.WorkflowID, "hello-hook/lab/id-") || !strings.HasPrefix(resp.URL, itUIURL+"/") {
		t.Fatalf("hook: %d %s", r.status, r.raw)
	}
	id, first := resp.WorkflowID, resp.RunID
	if err := waitClosed(t, id, time.Minute); err != nil {
		t.Fatalf("hello-hook failed: %v", err)
	}
	// A retry of the same request, even after its run ended, starts nothing.
	r = hook(body, itHookKey, "ci-build-42", time.Now())
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &resp) != nil || resp.Status != "existing" || resp.WorkflowID != id || resp.RunID != first {
		t.Errorf("the retried hook: %d %s", r.status, r.raw)
	}
	typeRuns(t, "hello-hook", 1)
	p, _ := progressOf(t, id)
	if s := step(t, p, "hello"); s.State != workflows.StateSucceeded {
		t.Errorf("hello: %+v", s)
	}
	// The signed request under another request ID is refused.
	if r := resend(body, itHookKey, "ci-build-42", "ci-build-44", time.Now()); r.status != 401 || !strings.Contains(r.raw, "bad signature") {
		t.Errorf("another request ID under ci-build-42's signature: %d %s", r.status, r.raw)
	}
	typeRuns(t, "hello-hook", 1)
	// A new request ID is a new run.
	r = hook(body, itHookKey, "ci-build-43", time.Now())
	if r.status != 201 || json.Unmarshal([]byte(r.raw), &resp) != nil || resp.WorkflowID == id {
		t.Fatalf("a new request: %d %s", r.status, r.raw)
	}
	typeRuns(t, "hello-hook", 2)
	_ = waitClosed(t, resp.WorkflowID, time.Minute)
	// Without a request ID, the same signed bytes replayed after the run
	// ended (within the signature's five minutes) start nothing: they get
	// the first answer.
	at := time.Now()
	noID := `{"runbook":"hello-hook","inventory":"lab","params":{"message":"no-id","count":1}}`
	r = resend(noID, itHookKey, "", "", at)
	if r.status != 201 || json.Unmarshal([]byte(r.raw), &resp) != nil {
		t.Fatalf("hook without a request ID: %d %s", r.status, r.raw)
	}
	third := resp
	typeRuns(t, "hello-hook", 3)
	_ = waitClosed(t, third.WorkflowID, time.Minute)
	r = resend(noID, itHookKey, "", "", at)
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &resp) != nil || resp.Status != "existing" || resp.WorkflowID != third.WorkflowID || resp.RunID != third.RunID {
		t.Errorf("the replayed signed request: %d %s", r.status, r.raw)
	}
	typeRuns(t, "hello-hook", 3)
}

// `kedge dev` starts the webhook beside its worker: with no signing secret
// configured it makes one and says where; a command signed with it starts
// a runbook on dev's own Temporal, and dev's worker posts the result.
func TestWebhookStartedByKedgeDev(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello-hook.yaml"), []byte(helloHook), 0o644); err != nil {
		t.Fatal(err)
	}
	recv := newReceiver(t)
	cfg := filepath.Join(dir, "chatops.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kedge/v1
kind: ChatOps
clusters:
  lab: {inventory: %s}
runbookPath: [%s]
responseURLs: [%s/]
allow:
  - slackUsers: [U0SRE]
    clusters: [lab]
    start: [hello-hook]
`, world.inventory, dir, recv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := &syncLog{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	data := filepath.Join(dir, "dev")
	go func() {
		done <- starter.RunDev(ctx, starter.DevOptions{
			DataDir: data, Address: "127.0.0.1:0", Namespace: "default", TaskQueue: "kedge-dev-webhook",
			CodecKey: filepath.Join(dir, "codec.key"), WebhookAddress: addr, WebhookConfig: cfg,
			Clusters: []string{world.inventory},
			Ready:    func(*devserver.Server) { close(ready) },
		}, out)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("kedge dev stopped: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("kedge dev did not come up:\n%s", out.String())
	}
	secretFile := filepath.Join(data, "slack-signing-secret")
	for _, want := range []string{"new Slack signing secret in " + secretFile, "webhook http://" + addr} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("kedge dev did not say %q:\n%s", want, out.String())
		}
	}
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), strings.TrimSpace(string(secret))) {
		t.Error("kedge dev printed the signing secret")
	}
	c := &chat{url: "http://" + addr, recv: recv}
	r := c.send(t, c.slashRequest("U0SRE", "run hello-hook lab message=from-dev", "trigger-dev", time.Now(), strings.TrimSpace(string(secret))))
	if r.outcome != "started" || r.took > 3*time.Second || !strings.Contains(r.Text, "`hello-hook/lab/") {
		t.Fatalf("a command to kedge dev: %d %s in %s: %s", r.status, r.outcome, r.took, r.raw)
	}
	recv.wait(t, time.Minute, "dev's worker to post the result", func(p posted) bool {
		return p.Path == "/commands/trigger-dev" && strings.Contains(p.Text, ":white_check_mark: *hello-hook* on *lab* succeeded")
	})
}

const gated = `apiVersion: kedge/v1
kind: Runbook
metadata: {name: gated}
steps:
  - id: first-gate
    approval: {prompt: "Go on to the second gate?"}
  - id: second-gate
    needs: [first-gate]
    approval: {prompt: "Run the command?"}
  - id: hello
    needs: [second-gate]
    action: host.run
    on: controller-1
    with: {command: "true"}
`

// Approval steps: `/kedge approve ID` approves the one waiting; the Abort
// button on the next rejects it, and the run ends failed with the reason
// posted.
func TestWebhookApprovalGates(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gated.yaml"), []byte(gated), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startChat(t, world.inventory, dir)
	r := c.slash(t, "U0SRE", "run gated lab", "trigger-gated")
	if r.outcome != "started" {
		t.Fatalf("run gated: %s", r.raw)
	}
	id := startedID(t, r, "gated")
	first := c.recv.wait(t, 30*time.Second, "the first gate posted", func(p posted) bool {
		return len(p.Blocks) == 2 && strings.Contains(p.Text, "`first-gate`: Go on to the second gate?")
	})
	_ = first
	if r := c.slash(t, "U0DEV", "approve "+id, "trigger-approve-dev"); r.outcome != "refused" {
		t.Errorf("approve by someone who may not: %s %s", r.outcome, r.raw)
	}
	if r := c.slash(t, "U0SRE", "approve "+id, "trigger-approve"); r.outcome != "decided" || !strings.Contains(r.Text, "<@U0SRE> approved `first-gate` of *gated* on *lab*") {
		t.Fatalf("/kedge approve: %s %s", r.outcome, r.raw)
	}
	second := c.recv.wait(t, 30*time.Second, "the second gate posted", func(p posted) bool {
		return len(p.Blocks) == 2 && strings.Contains(p.Text, "`second-gate`")
	})
	r = c.send(t, c.clickRequest(t, "U0SRE", slackmsg.ActionAbort, buttonsOf(t, second, 2)[1].Value, "1700000100.1", time.Now(), itSigningSecret))
	if r.outcome != "decided" || !strings.Contains(r.Text, "rejected `second-gate`") {
		t.Fatalf("Abort on a gate: %s %s", r.outcome, r.raw)
	}
	if err := waitClosed(t, id, time.Minute); err == nil || !strings.Contains(err.Error(), "rejected by slack:sre (U0SRE)") {
		t.Errorf("the run ended with %v, want a rejection by slack:sre (U0SRE)", err)
	}
	final := c.recv.wait(t, 30*time.Second, "the result posted", func(p posted) bool {
		return p.Path == "/commands/trigger-gated" && strings.HasPrefix(p.Text, ":x:")
	})
	for _, want := range []string{":x: *gated* on *lab* failed", "rejected by slack:sre (U0SRE)", "`first-gate` succeeded — approved by slack:sre (U0SRE)", "`hello` "} {
		if !strings.Contains(final.Text, want) {
			t.Errorf("the result lacks %q:\n%s", want, final.Text)
		}
	}
	d := decisions(t, id)
	if len(d) != 2 || d[0].Step != "first-gate" || d[0].Decision != workflows.DecisionApprove || d[1].Decision != workflows.DecisionReject || d[1].By != "slack:sre (U0SRE)" {
		t.Errorf("decisions in the history: %+v", d)
	}

	// A run `kedge run` started (RUNBOOK/CLUSTER/...) holds the cluster too.
	cliID := startRunInv(t, filepath.Join(dir, "gated.yaml"), world.inventory)
	defer func() { _, _, _ = kedge(t, "cancel", cliID); _ = waitClosed(t, cliID, time.Minute) }()
	eventually(t, 10*time.Second, "visibility to list "+cliID, func() bool {
		resp, err := world.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: world.srv.Namespace(), Query: "WorkflowId = '" + cliID + "' AND ExecutionStatus = 'Running'"})
		return err == nil && len(resp.GetExecutions()) == 1
	})
	beside := typeCount(t, "gated")
	if r := c.slash(t, "U0SRE", "run gated lab", "trigger-gated-beside"); r.outcome != "conflict" || !strings.Contains(r.Text, "gated is already running on lab") || !strings.Contains(r.Text, url.PathEscape(cliID)) {
		t.Errorf("a chat run beside a CLI run: %s %s", r.outcome, r.raw)
	}
	typeRuns(t, "gated", beside) // none started beside the CLI's

	// kedge run keeps the same rule: one run of a runbook per cluster,
	// whichever front door started the first.
	if _, errOut, code := kedge(t, "run", filepath.Join(dir, "gated.yaml"), "--inventory", world.inventory); code == 0 || !strings.Contains(errOut, "gated already runs on lab: "+cliID) {
		t.Errorf("a CLI run beside a CLI run: exit %d %s", code, errOut)
	}
	// So does kedge rerun: a new run of the same input is a run too.
	if _, errOut, code := kedge(t, "rerun", cliID); code == 0 || !strings.Contains(errOut, "gated already runs on lab: "+cliID) {
		t.Errorf("a rerun beside a CLI run: exit %d %s", code, errOut)
	}
	typeRuns(t, "gated", beside)
}
