package chatops

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/workflows"
)

const testSigningSecret = "8f14e45fceea167a5a36dedd4bea2543"

// signSlack signs body the way Slack does.
func signSlack(h http.Header, secret string, at time.Time, body []byte) {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%s:%s", ts, body)
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer serves a Server without Temporal: every request here is
// answered before a workflow would be touched.
func testServer(t *testing.T) (*httptest.Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s := &Server{Config: loadGood(t), SigningSecret: testSigningSecret,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, logs
}

type answer struct {
	status  int
	outcome string
	body    string
}

func send(t *testing.T, method, u, contentType string, body []byte, sign func(http.Header, []byte)) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if sign != nil {
		sign(req.Header, body)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get(HeaderOutcome), string(b)}
}

func slashForm(user, channel, text string) []byte {
	return []byte(url.Values{
		"command": {"/kedge"}, "text": {text}, "user_id": {user}, "user_name": {"someone"}, "channel_id": {channel},
		"team_id": {"T0TEAM"}, "trigger_id": {"1.2.abc"}, "response_url": {"https://hooks.slack.com/commands/T0TEAM/1/abc"},
	}.Encode())
}

const form = "application/x-www-form-urlencoded"

func signedNow(h http.Header, b []byte) { signSlack(h, testSigningSecret, time.Now(), b) }

func TestSlackRequestsAreVerifiedAndBadInputAnswered(t *testing.T) {
	ts, logs := testServer(t)
	cmd := ts.URL + "/slack/commands"
	ok := slashForm("U0SRE", "C0ANY", "help")
	for _, tc := range []struct {
		name        string
		method      string
		contentType string
		body        []byte
		sign        func(http.Header, []byte)
		status      int
		outcome     string
		says        string
	}{
		{"help", "POST", form, ok, signedNow, 200, "ok", "/kedge swap-kubelet CLUSTER"},
		{"wrong method", "GET", "", nil, nil, 405, "", ""},
		{"unsigned", "POST", form, ok, nil, 401, "refused", "missing X-Slack-Signature"},
		{"forged", "POST", form, ok, func(h http.Header, b []byte) { signSlack(h, "not-the-secret", time.Now(), b) }, 401, "refused", "bad signature"},
		{"tampered", "POST", form, ok, func(h http.Header, b []byte) { signSlack(h, testSigningSecret, time.Now(), append(b, 'x')) }, 401, "refused", "bad signature"},
		{"stale", "POST", form, ok, func(h http.Header, b []byte) { signSlack(h, testSigningSecret, time.Now().Add(-6*time.Minute), b) }, 401, "refused", "stale request"},
		{"from the future", "POST", form, ok, func(h http.Header, b []byte) { signSlack(h, testSigningSecret, time.Now().Add(6*time.Minute), b) }, 401, "refused", "stale request"},
		{"bad timestamp", "POST", form, ok, func(h http.Header, b []byte) {
			signedNow(h, b)
			h.Set("X-Slack-Request-Timestamp", "yesterday")
		}, 401, "refused", "bad X-Slack-Request-Timestamp"},
		{"oversized", "POST", form, append(ok, bytes.Repeat([]byte("&x=y"), 20000)...), signedNow, 413, "refused", "at most 65536"},
		{"not a form", "POST", "application/json", ok, signedNow, 415, "refused", "want Content-Type"},
		{"malformed form", "POST", form, []byte("text=%zz&user_id=U0SRE"), signedNow, 400, "refused", "malformed form"},
		{"no user", "POST", form, []byte("text=help"), signedNow, 400, "invalid", "no user_id"},
		{"unknown command", "POST", form, slashForm("U0SRE", "C0ANY", "reboot-everything now"), signedNow, 200, "invalid", `unknown command \"reboot-everything\"`},
		{"not allowed", "POST", form, slashForm("U0WHO", "C0ANY", "swap-kubelet mercury image=quay.io/poseidon/kubelet:v1.35.4"), signedNow, 200, "refused",
			"not allowed: slack:someone (U0WHO) may not start kubelet-image-swap on mercury"},
		{"not from this channel", "POST", form, slashForm("U0DEV", "C0RANDOM", "run run-command mercury command=uptime"), signedNow, 200, "refused", "not allowed"},
		// An upgrade is a start of cluster-upgrade, under the same rules:
		// a user who may run run-command there may not upgrade.
		{"an upgrade not allowed", "POST", form, slashForm("U0DEV", "C0OPS", "upgrade mercury v1.36.3 destination=local"), signedNow, 200, "refused",
			"may not start cluster-upgrade on mercury"},
		{"unknown cluster", "POST", form, slashForm("U0SRE", "C0ANY", "swap-kubelet venus image=quay.io/poseidon/kubelet:v1.35.4"), signedNow, 200, "invalid", `unknown cluster \"venus\" (known: mercury)`},
		{"unknown runbook", "POST", form, slashForm("U0SRE", "C0ANY", "run nothing-like-it mercury"), signedNow, 200, "invalid", `no runbook named \"nothing-like-it\"`},
		{"bad image", "POST", form, slashForm("U0SRE", "C0ANY", "swap-kubelet mercury image=quay.io/poseidon/kubelet"), signedNow, 200, "invalid", "needs a tag or a digest"},
		{"wrong type", "POST", form, slashForm("U0SRE", "C0ANY", "swap-kubelet mercury image=quay.io/poseidon/kubelet:v1.35.4 max-unavailable=two"), signedNow, 200, "invalid",
			`param maxUnavailable: \"two\" is not an integer`},
		{"unknown param", "POST", form, slashForm("U0SRE", "C0ANY", "swap-kubelet mercury image=quay.io/poseidon/kubelet:v1.35.4 max-unavail=2"), signedNow, 200, "invalid",
			`has no param \"maxUnavail\"`},
		{"unknown node", "POST", form, slashForm("U0SRE", "C0ANY", "swap-kubelet mercury image=quay.io/poseidon/kubelet:v1.35.4 nodes=worker-9"), signedNow, 200, "invalid", "worker-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, tc.method, cmd, tc.contentType, tc.body, tc.sign)
			if a.status != tc.status || a.outcome != tc.outcome || !strings.Contains(a.body, tc.says) {
				t.Errorf("got %d %q %s\nwant %d %q with %q", a.status, a.outcome, a.body, tc.status, tc.outcome, tc.says)
			}
			if a.status == 200 && tc.outcome != "ok" && !strings.Contains(a.body, `"response_type":"ephemeral"`) {
				t.Errorf("an error is shown to the channel: %s", a.body)
			}
		})
	}
	out := logs.String()
	for _, secret := range []string{testSigningSecret, "a-very-long-ci-secret", "v0="} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds a secret or a signature (%q)", secret)
		}
	}
	for _, want := range []string{`"outcome":"refused","reason":"stale request`, `"subject":"slack:someone (U0WHO)","action":"start","outcome":"refused"`} {
		if !strings.Contains(out, want) {
			t.Errorf("no audit line with %s in\n%s", want, out)
		}
	}
}

func interaction(t *testing.T, actionID, value string) []byte {
	t.Helper()
	p, err := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]string{"id": "U0SRE", "name": "sre"},
		"team": map[string]string{"id": "T0TEAM"}, "response_url": "https://hooks.slack.com/actions/x",
		"actions": []map[string]string{{"action_id": actionID, "block_id": "kedge.decide", "type": "button", "value": value, "action_ts": "1.2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return []byte(url.Values{"payload": {string(p)}}.Encode())
}

func TestInteractionsAreVerifiedAndBadInputAnswered(t *testing.T) {
	ts, _ := testServer(t)
	u := ts.URL + "/slack/interactive"
	good := interaction(t, slackmsg.ActionContinue, `{"w":"kubelet-image-swap/mercury","k":"rollout","t":"kubelet-image-swap/mercury/workers","s":"workers","q":1}`)
	for _, tc := range []struct {
		name   string
		body   []byte
		sign   func(http.Header, []byte)
		status int
		says   string
	}{
		{"forged", good, func(h http.Header, b []byte) { signSlack(h, "guess", time.Now(), b) }, 401, "bad signature"},
		{"replayed late", good, func(h http.Header, b []byte) { signSlack(h, testSigningSecret, time.Now().Add(-10*time.Minute), b) }, 401, "stale request"},
		{"no payload", []byte("payload="), signedNow, 400, "malformed interaction payload"},
		{"payload not JSON", []byte("payload=%7Bnope"), signedNow, 400, "malformed interaction payload"},
		{"another action", interaction(t, "somebody.else", "{}"), signedNow, 400, "not a Kedge button click"},
		{"bad value", interaction(t, slackmsg.ActionAbort, "not json"), signedNow, 400, "malformed button value"},
		{"unknown kind", interaction(t, slackmsg.ActionAbort, `{"w":"a","t":"b","k":"reboot"}`), signedNow, 400, "malformed button value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, "POST", u, form, tc.body, tc.sign)
			if a.status != tc.status || !strings.Contains(a.body, tc.says) {
				t.Errorf("got %d %s, want %d with %q", a.status, a.body, tc.status, tc.says)
			}
		})
	}
}

func TestHookRequestsAreVerifiedAndBadInputAnswered(t *testing.T) {
	ts, logs := testServer(t)
	u := ts.URL + "/hooks/run"
	key := []byte("a-very-long-ci-secret-0123456789")
	sign := func(at time.Time, k []byte) func(http.Header, []byte) {
		return func(h http.Header, b []byte) {
			h.Set(HeaderKey, "ci")
			h.Set(HeaderSig, SignHook(k, at, h.Get(HeaderReq), b))
		}
	}
	now := sign(time.Now(), key)
	body := func(s string) []byte { return []byte(s) }
	swap := body(`{"runbook":"kubelet-image-swap","inventory":"mercury","params":{"image":"quay.io/poseidon/kubelet:v1.35.4","maxUnavailable":2}}`)
	for _, tc := range []struct {
		name        string
		contentType string
		body        []byte
		sign        func(http.Header, []byte)
		status      int
		says        string
	}{
		{"unsigned", "application/json", swap, nil, 401, "missing X-Kedge-Key"},
		{"unknown key", "application/json", swap, func(h http.Header, b []byte) { now(h, b); h.Set(HeaderKey, "who") }, 401, `unknown key \"who\"`},
		{"forged", "application/json", swap, sign(time.Now(), []byte("guess-guess-guess-guess")), 401, "bad signature"},
		{"stale", "application/json", swap, sign(time.Now().Add(-6*time.Minute), key), 401, "stale request"},
		{"malformed signature", "application/json", swap, func(h http.Header, b []byte) { now(h, b); h.Set(HeaderSig, "sha256=abc") }, 401, "malformed X-Kedge-Signature"},
		{"oversized", "application/json", bytes.Repeat([]byte(" "), MaxBody+1), now, 413, "at most 65536"},
		{"not JSON", "text/plain", swap, now, 415, "want Content-Type application/json"},
		{"bad JSON", "application/json", body(`{"runbook": `), now, 400, "malformed JSON body"},
		{"unknown field", "application/json", body(`{"runbook":"x","inventory":"mercury","cluster":"y"}`), now, 400, `unknown field \"cluster\"`},
		{"two values", "application/json", body(`{"runbook":"x","inventory":"mercury"} {}`), now, 400, "more than one value"},
		{"inventory is a path", "application/json", body(`{"runbook":"run-command","inventory":"/etc/passwd"}`), now, 400, "is not a cluster name"},
		{"not allowed", "application/json", body(`{"runbook":"run-command","inventory":"mercury","params":{"command":"id"}}`), now, 403, "not allowed: webhook:ci may not start run-command on mercury"},
		{"wrong type", "application/json", body(`{"runbook":"kubelet-image-swap","inventory":"mercury","params":{"image":"quay.io/poseidon/kubelet:v1.35.4","maxUnavailable":1.5}}`), now, 422, "param maxUnavailable: want a int"},
		{"nested param", "application/json", body(`{"runbook":"kubelet-image-swap","inventory":"mercury","params":{"image":{"a":1}}}`), now, 422, "param image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, "POST", u, tc.contentType, tc.body, tc.sign)
			if a.status != tc.status || !strings.Contains(a.body, tc.says) {
				t.Errorf("got %d %s, want %d with %q", a.status, a.body, tc.status, tc.says)
			}
		})
	}
	if strings.Contains(logs.String(), string(key)) {
		t.Error("the log holds the HMAC key")
	}
}

func TestSignHookRoundTrip(t *testing.T) {
	c := loadGood(t)
	at := time.Unix(1700000000, 0)
	key := []byte("alerts-secret-0123456789abcdef")
	h := http.Header{}
	h.Set(HeaderKey, "alerts")
	h.Set(HeaderReq, "build-7")
	h.Set(HeaderSig, SignHook(key, at, "build-7", []byte("{}")))
	v, err := verifyHook(c, h, []byte("{}"), at.Add(4*time.Minute))
	if err != nil || v.Key != "alerts" || !v.At.Equal(at) || len(v.MAC) != sha256.Size {
		t.Fatalf("verifyHook = %+v, %v", v, err)
	}
	if _, err := verifyHook(c, h, []byte("{}"), at.Add(-5*time.Minute-time.Second)); err == nil {
		t.Error("a timestamp more than 5 minutes ahead passed")
	}
	// The request ID is signed: the same signature under another ID, or
	// under none, is refused.
	for _, id := range []string{"build-8", ""} {
		h2 := h.Clone()
		h2.Set(HeaderReq, id)
		if _, err := verifyHook(c, h2, []byte("{}"), at); err == nil || !strings.Contains(err.Error(), "bad signature") {
			t.Errorf("request ID %q under build-7's signature: %v", id, err)
		}
	}
	// A rotated key: any v1 that matches passes.
	h.Set(HeaderSig, h.Get(HeaderSig)+",v1="+strings.Repeat("00", 32))
	if _, err := verifyHook(c, h, []byte("{}"), at); err != nil {
		t.Errorf("two v1 values: %v", err)
	}
}

// A request names its run: the same request always the same workflow ID
// (so Temporal, which starts an ID once, remembers it), another request
// another ID. With a request ID, the ID depends on nothing else of the
// request (a retry is signed anew: another timestamp, another MAC);
// without, on the signature. Every ID is keyed with the secret that
// verified the request and starts with RUNBOOK/CLUSTER/.
func TestRunIDsNameTheRequest(t *testing.T) {
	at := time.Unix(1700000000, 0)
	ci := Subject{Source: SourceWebhook, Key: "ci"}
	base := startRequest{Subject: ci, Runbook: "hello", Cluster: "mercury", Signed: signed{Secret: []byte("ci-key-0123456789abcdef"), MAC: []byte("mac-1"), At: at}}
	with := func(f func(r *startRequest)) string {
		r := base
		f(&r)
		return r.runID()
	}
	bySig := base.runID()
	if !regexp.MustCompile(`^hello/mercury/20231114-221320-[0-9a-f]{12}$`).MatchString(bySig) {
		t.Errorf("without a request ID: %s", bySig)
	}
	if bySig != with(func(*startRequest) {}) {
		t.Error("the same signed request names two IDs")
	}
	byID := with(func(r *startRequest) { r.RequestID = "build-42" })
	if !regexp.MustCompile(`^hello/mercury/id-[0-9a-f]{16}$`).MatchString(byID) {
		t.Errorf("with a request ID: %s", byID)
	}
	if retried := with(func(r *startRequest) {
		r.RequestID = "build-42"
		r.Signed.MAC, r.Signed.At = []byte("mac-2"), at.Add(time.Minute)
		r.Params = map[string]any{"other": true}
	}); retried != byID {
		t.Errorf("a request ID signed anew names %s, want %s", retried, byID)
	}
	seen := map[string]string{"signature": bySig, "request id": byID}
	for name, id := range map[string]string{
		"another signature":             with(func(r *startRequest) { r.Signed.MAC = []byte("mac-2") }),
		"another request ID":            with(func(r *startRequest) { r.RequestID = "build-43" }),
		"the request ID of another key": with(func(r *startRequest) { r.RequestID = "build-42"; r.Subject.Key = "alerts" }),
		"another secret":                with(func(r *startRequest) { r.RequestID = "build-42"; r.Signed.Secret = []byte("guess") }),
		"another cluster":               with(func(r *startRequest) { r.RequestID = "build-42"; r.Cluster = "venus" }),
	} {
		for other, prev := range seen {
			if id == prev {
				t.Errorf("%s names the same ID as %s: %s", name, other, id)
			}
		}
		seen[name] = id
	}
	if !namesOneOf(byID, []string{"mercury"}) || !namesOneOf(bySig, []string{"mercury"}) {
		t.Error("status and approvals do not find the cluster in a chat run's ID")
	}
}

func TestPauseMessageCarriesItsPause(t *testing.T) {
	in := workflows.ChatFollowInput{WorkflowID: "kubelet-image-swap/mercury", Runbook: "kubelet-image-swap", Cluster: "mercury", Link: "http://ui/x"}
	pa := runs.Pause{Kind: runs.PauseRollout, Target: "kubelet-image-swap/mercury/workers", Step: "workers", Seq: 1, Prompt: "paused: 1 failed, budget 0",
		Failed: []string{"worker-2: DrainBlocked <pdb>"}}
	m := slackmsg.PauseMessage(in, pa)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, want := range []string{`"action_id":"kedge.continue"`, `"action_id":"kedge.abort"`, `"style":"danger"`, `"confirm"`} {
		if !strings.Contains(s, want) {
			t.Errorf("message lacks %s: %s", want, s)
		}
	}
	if !strings.Contains(m.Text, "DrainBlocked &lt;pdb&gt;") {
		t.Errorf("the error is not escaped for mrkdwn: %s", m.Text)
	}
	var v slackmsg.ButtonValue
	var back struct {
		Blocks []struct {
			Elements []struct {
				Value string `json:"value"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Blocks) != 2 || len(back.Blocks[1].Elements) != 2 {
		t.Fatalf("blocks: %v %s", err, s)
	}
	if err := json.Unmarshal([]byte(back.Blocks[1].Elements[0].Value), &v); err != nil || v.Workflow != in.WorkflowID || !v.Same(pa) {
		t.Errorf("button value %q -> %+v, %v", back.Blocks[1].Elements[0].Value, v, err)
	}
	if strings.Contains(s, slackmsg.ActionRestore) {
		t.Errorf("a pause that takes no restore offers one: %s", s)
	}

	// A pause that takes a restore gets a third button, confirmed first.
	pa.Restore = true
	raw, err = json.Marshal(slackmsg.PauseMessage(in, pa))
	if err != nil {
		t.Fatal(err)
	}
	var withRestore struct {
		Blocks []struct {
			Elements []struct {
				ActionID string          `json:"action_id"`
				Value    string          `json:"value"`
				Confirm  json.RawMessage `json:"confirm"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &withRestore); err != nil || len(withRestore.Blocks) != 2 || len(withRestore.Blocks[1].Elements) != 3 {
		t.Fatalf("blocks with a restore: %v %s", err, raw)
	}
	if r := withRestore.Blocks[1].Elements[2]; r.ActionID != slackmsg.ActionRestore || len(r.Confirm) == 0 || r.Value != back.Blocks[1].Elements[0].Value {
		t.Errorf("the restore button: %+v", r)
	}
}

// Status and decisions are authorized before Temporal is asked anything:
// an ID on a cluster the person may not see, or naming no cluster, is
// answered as a missing run without a Temporal call (this server has no
// client: a call would panic).
func TestReadableAsksTemporalNothingBeforeAuthorizing(t *testing.T) {
	s := &Server{Config: loadGood(t)}
	stranger := Subject{Source: SourceSlack, UserID: "U0NOBODY"}
	ci := Subject{Source: SourceWebhook, Key: "alerts"}
	for _, c := range []struct {
		sub Subject
		id  string
	}{
		{stranger, "kubelet-image-swap/mercury"},
		{stranger, "mercury/node/worker-1"},
		{ci, "kubelet-image-swap/mercury/20261125-000000-abcd"},
		{Subject{Source: SourceSlack, UserID: "U0SRE"}, "kubelet-image-swap/venus"},
		{Subject{Source: SourceSlack, UserID: "U0SRE"}, "no-cluster-here"},
	} {
		for _, verb := range []Verb{VerbRead, VerbApprove} {
			_, _, err := s.readable(t.Context(), c.sub, c.id, verb)
			var he *httpError
			if !errors.As(err, &he) || he.Status != http.StatusNotFound || he.Msg != fmt.Sprintf("no run %q that you may see", c.id) {
				t.Errorf("%s %s %s: %v", c.sub, verb, c.id, err)
			}
		}
	}
	if !namesOneOf("kubelet-image-swap/mercury/workers", []string{"mercury"}) || !namesOneOf("mercury/node/w", []string{"mercury"}) ||
		namesOneOf("mercury/x", []string{"mercury"}) {
		t.Error("namesOneOf")
	}
}
