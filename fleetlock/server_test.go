package fleetlock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/integration/fleetlockclient"
)

const (
	idA = "0123456789abcdef0123456789abcdef" // mercury/node-a's client ID
	idB = "fedcba9876543210fedcba9876543210" // mercury/node-b's, group workers
)

func body(id, group string) string {
	b, _ := json.Marshal(map[string]any{"client_params": map[string]string{"id": id, "group": group}})
	return string(b)
}

// attempt is one request as an attacker (or a confused client) sends it.
type attempt struct {
	name     string
	method   string // "" is POST
	path     string // under /fleetlock/
	auth     string // Authorization header
	noHeader bool   // no fleet-lock-protocol header
	body     string
	chunked  bool // send the body without a length
}

type answer struct {
	status int
	header http.Header
	raw    string
	perr   protocolError
}

func send(t *testing.T, srv *httptest.Server, a attempt) answer {
	t.Helper()
	method := a.method
	if method == "" {
		method = http.MethodPost
	}
	var rd io.Reader = strings.NewReader(a.body)
	if a.chunked {
		rd = io.MultiReader(rd)
	}
	req, err := http.NewRequest(method, srv.URL+"/fleetlock/"+a.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if !a.noHeader {
		req.Header.Set(ProtocolHeader, "true")
	}
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	ans := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &ans.perr); err != nil || ans.perr.Kind == "" || ans.perr.Value == "" {
			t.Fatalf("%s: answer %d is not the protocol's error value: %q", a.name, resp.StatusCode, raw)
		}
	}
	return ans
}

// TestRefusals: every request an attacker or a confused client can make
// is refused with its status and kind, before the Coordinator hears of
// it, with one audit line that holds no token.
func TestRefusals(t *testing.T) {
	coord := &fakeCoordinator{}
	logs := &logBuffer{}
	srv := httptest.NewServer(newTestServer(coord, logs))
	defer srv.Close()
	tokA := Token(mercuryKey, "mercury", "node-a")
	pre := func(cluster, node, tok string) string { return cluster + "/" + node + "/" + tok + "/v1/pre-reboot" }
	big := `{"client_params": {"id": "` + idA + `", "group": "default"}, "pad": "` + strings.Repeat("x", MaxBody) + `"}`

	cases := []struct {
		attempt
		status int
		kind   string
		authed bool
		// claimed is the cluster/node the audit line names.
		claimed string
	}{
		{attempt{name: "no token", path: "mercury/node-a/v1/pre-reboot", body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "empty bearer", path: "mercury/node-a/v1/pre-reboot", auth: "Bearer ", body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "basic auth", path: "mercury/node-a/v1/pre-reboot", auth: "Basic " + tokA, body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "another node's token", path: pre("mercury", "node-a", Token(mercuryKey, "mercury", "node-b")), body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "another node's token as bearer", path: "mercury/node-a/v1/pre-reboot", auth: "Bearer " + Token(mercuryKey, "mercury", "node-b"), body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "same node name, other cluster's token", path: pre("mercury", "node-a", Token(venusKey, "venus", "node-a")), body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "this cluster's token, other cluster's path", path: pre("venus", "node-a", tokA), body: body("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "default")}, 401, KindFailedAuth, false, "venus/node-a"},
		{attempt{name: "this key, other cluster's name", path: pre("mercury", "node-a", Token(mercuryKey, "venus", "node-a")), body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "unknown cluster", path: pre("pluto", "node-a", Token(mercuryKey, "pluto", "node-a")), body: body(idA, "default")}, 401, KindFailedAuth, false, "pluto/node-a"},
		{attempt{name: "key store failure", path: pre("broken", "node-a", Token(mercuryKey, "broken", "node-a")), body: body(idA, "default")}, 401, KindFailedAuth, false, "broken/node-a"},
		{attempt{name: "short cluster key", path: pre("short", "node-a", Token(keys["short"], "short", "node-a")), body: body("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "default")}, 401, KindFailedAuth, false, "short/node-a"},
		{attempt{name: "padded token", path: pre("mercury", "node-a", tokA+"="), body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "non-canonical token", path: pre("mercury", "node-a", nonCanonical(tokA)), body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "truncated token", path: pre("mercury", "node-a", tokA[:20]), body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "no token, wrong method", method: http.MethodGet, path: "mercury/node-a/v1/pre-reboot"}, 401, KindFailedAuth, false, "mercury/node-a"},
		{attempt{name: "token where the node belongs", path: "mercury/" + tokA + "/v1/pre-reboot", body: body(idA, "default")}, 401, KindFailedAuth, false, "mercury/(withheld: shaped like a token)"},
		{attempt{name: "not an endpoint", path: "mercury/node-a/" + tokA + "/v1/reboot-now", body: body(idA, "default")}, 404, KindNotFound, false, "mercury/node-a"},
		{attempt{name: "v2", path: "mercury/node-a/" + tokA + "/v2/pre-reboot", body: body(idA, "default")}, 404, KindNotFound, false, "mercury/node-a"},
		{attempt{name: "trailing slash", path: pre("mercury", "node-a", tokA) + "/", body: body(idA, "default")}, 404, KindNotFound, false, "mercury/node-a"},
		{attempt{name: "bad node name", path: pre("mercury", "node%20a", tokA), body: body(idA, "default")}, 404, KindNotFound, false, "/"},
		{attempt{name: "wrong client id", path: pre("mercury", "node-a", tokA), body: body(idB, "default")}, 403, KindUnknownNode, true, "mercury/node-a"},
		{attempt{name: "wrong group", path: pre("mercury", "node-a", tokA), body: body(idA, "workers")}, 403, KindUnknownNode, true, "mercury/node-a"},
		{attempt{name: "node not set up", path: pre("mercury", "node-c", Token(mercuryKey, "mercury", "node-c")), body: body(idA, "default")}, 403, KindUnknownNode, true, "mercury/node-c"},
		{attempt{name: "node not in inventory", path: pre("mercury", "node-z", Token(mercuryKey, "mercury", "node-z")), body: body(idA, "default")}, 403, KindUnknownNode, true, "mercury/node-z"},
		{attempt{name: "missing protocol header", path: pre("mercury", "node-a", tokA), noHeader: true, body: body(idA, "default")}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "wrong method", method: http.MethodGet, path: pre("mercury", "node-a", tokA)}, 405, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "wrong method PUT", method: http.MethodPut, path: pre("mercury", "node-a", tokA), body: body(idA, "default")}, 405, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "oversized body", path: pre("mercury", "node-a", tokA), body: big}, 413, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "oversized body, no length", path: pre("mercury", "node-a", tokA), body: big, chunked: true}, 413, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "malformed JSON", path: pre("mercury", "node-a", tokA), body: `{"client_params": {"id": "` + idA}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "two JSON values", path: pre("mercury", "node-a", tokA), body: body(idA, "default") + body(idA, "default")}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "empty body", path: pre("mercury", "node-a", tokA)}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "no client_params", path: pre("mercury", "node-a", tokA), body: `{"id": "` + idA + `"}`}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "empty id", path: pre("mercury", "node-a", tokA), body: body("", "default")}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "id with a newline", path: pre("mercury", "node-a", tokA), body: body(idA+"\nforged", "default")}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "no group", path: pre("mercury", "node-a", tokA), body: `{"client_params": {"id": "` + idA + `"}}`}, 400, KindBadRequest, true, "mercury/node-a"},
		{attempt{name: "group off the protocol's pattern", path: pre("mercury", "node-a", tokA), body: body(idA, "de_fault")}, 400, KindBadRequest, true, "mercury/node-a"},
	}
	var authBody string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logs.take()
			ans := send(t, srv, c.attempt)
			if ans.status != c.status || ans.perr.Kind != c.kind {
				t.Fatalf("got %d %s (%s), want %d %s", ans.status, ans.perr.Kind, ans.perr.Value, c.status, c.kind)
			}
			if n := len(coord.Calls()); n != 0 {
				t.Fatalf("the Coordinator was called %d times", n)
			}
			if strings.Contains(ans.raw, tokA) {
				t.Fatalf("the answer holds a token: %s", ans.raw)
			}
			if c.kind == KindFailedAuth {
				// No oracle: every authentication failure reads the same.
				if authBody == "" {
					authBody = ans.raw
				} else if ans.raw != authBody {
					t.Fatalf("authentication failures differ: %q and %q", ans.raw, authBody)
				}
			}
			m := auditLine(t, logs.take())
			if m["outcome"] != OutcomeRefused || m["authenticated"] != c.authed || m["kind"] != c.kind {
				t.Fatalf("audit line: %v", m)
			}
			if got := m["cluster"].(string) + "/" + m["node"].(string); got != c.claimed {
				t.Fatalf("audit line names %q, want %q", got, c.claimed)
			}
			if m["remote"] == "" || m["reason"] == "" {
				t.Fatalf("audit line without remote or reason: %v", m)
			}
		})
	}
}

// nonCanonical spells a token's bytes otherwise: its last character
// carries two unused bits, set here.
func nonCanonical(tok string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, tok[len(tok)-1])
	return tok[:len(tok)-1] + string(alphabet[i^1])
}

// TestZincatiCycle: a node's update, as Zincati walks it, against the
// server through the test world's client: both read the protocol alike.
func TestZincatiCycle(t *testing.T) {
	coord := &fakeCoordinator{}
	logs := &logBuffer{}
	srv := httptest.NewServer(newTestServer(coord, logs))
	defer srv.Close()
	ctx := context.Background()
	base := BaseURL(srv.URL+"/fleetlock", "mercury", "node-b", Token(mercuryKey, "mercury", "node-b"))
	c, err := fleetlockclient.New(base, idB, "workers", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	expect := func(endpoint, outcome string) map[string]any {
		t.Helper()
		m := auditLine(t, logs.take())
		if m["endpoint"] != endpoint || m["outcome"] != outcome || m["authenticated"] != true ||
			m["cluster"] != "mercury" || m["node"] != "node-b" || m["clientId"] != idB || m["group"] != "workers" {
			t.Fatalf("audit line: %v", m)
		}
		return m
	}

	// Initialization: release any slot; steady.
	if err := c.SteadyState(ctx); err != nil {
		t.Fatal(err)
	}
	expect(EndpointSteadyState, OutcomeGranted)
	if err := c.UpdateStaged(); err != nil {
		t.Fatal(err)
	}

	// Pre-reboot: waits while the Coordinator drains, then granted.
	coord.setDecide(func(_ context.Context, endpoint string, _ Request) (Decision, error) {
		return Decision{Reason: "draining node-b: 3 pods left"}, nil
	})
	granted, reason, err := c.PreReboot(ctx)
	var rej *fleetlockclient.Rejection
	if granted || reason != "draining node-b: 3 pods left" || !errors.As(err, &rej) || rej.Status != 409 || rej.Kind != KindFailedLock {
		t.Fatalf("waiting pre-reboot: %v %q %v", granted, reason, err)
	}
	expect(EndpointPreReboot, OutcomeWaiting)
	coord.setDecide(nil)
	if granted, reason, err := c.PreReboot(ctx); !granted || err != nil {
		t.Fatalf("granted pre-reboot: %v %q %v", granted, reason, err)
	}
	expect(EndpointPreReboot, OutcomeGranted)
	if c.State() != fleetlockclient.StateFinalization {
		t.Fatalf("state %s", c.State())
	}

	// Reboot; finalization: steady-state waits for the uncordon, then
	// frees the slot.
	if err := c.Reboot(); err != nil {
		t.Fatal(err)
	}
	coord.setDecide(func(_ context.Context, endpoint string, _ Request) (Decision, error) {
		return Decision{Reason: "uncordoning node-b"}, nil
	})
	err = c.SteadyState(ctx)
	if !errors.As(err, &rej) || rej.Status != 409 || rej.Kind != KindFailedUnlock || rej.Value != "uncordoning node-b" {
		t.Fatalf("waiting steady-state: %v", err)
	}
	expect(EndpointSteadyState, OutcomeWaiting)
	coord.setDecide(nil)
	if err := c.SteadyState(ctx); err != nil {
		t.Fatal(err)
	}
	expect(EndpointSteadyState, OutcomeGranted)

	calls := coord.Calls()
	want := []string{EndpointSteadyState, EndpointPreReboot, EndpointPreReboot, EndpointSteadyState, EndpointSteadyState}
	if len(calls) != len(want) {
		t.Fatalf("calls: %+v", calls)
	}
	for i, cl := range calls {
		r := cl.Request
		if cl.Endpoint != want[i] || r.Cluster != "mercury" || r.Node != "node-b" || r.ClientID != idB || r.Group != "workers" || r.Remote == "" {
			t.Fatalf("call %d: %+v", i, cl)
		}
	}
}

// bearerTransport adds an Authorization header, as a client other than
// Zincati may.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestBearer: the token as Authorization: Bearer, the path without it.
func TestBearer(t *testing.T) {
	coord := &fakeCoordinator{}
	logs := &logBuffer{}
	srv := httptest.NewServer(newTestServer(coord, logs))
	defer srv.Close()
	hc := &http.Client{Transport: bearerTransport{Token(mercuryKey, "mercury", "node-a")}}
	c, err := fleetlockclient.New(srv.URL+"/fleetlock/mercury/node-a/", idA, "", hc)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SteadyState(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := auditLine(t, logs.take())
	if m["outcome"] != OutcomeGranted || m["group"] != DefaultGroup {
		t.Fatalf("audit line: %v", m)
	}
	if n := len(coord.Calls()); n != 1 {
		t.Fatalf("%d calls", n)
	}
}

// TestBaseURLNeedsItsSlash: without its trailing slash, a base URL loses
// its token to Zincati's URL resolution, and the node is refused.
func TestBaseURLNeedsItsSlash(t *testing.T) {
	coord := &fakeCoordinator{}
	logs := &logBuffer{}
	srv := httptest.NewServer(newTestServer(coord, logs))
	defer srv.Close()
	base := BaseURL(srv.URL+"/fleetlock/", "mercury", "node-a", Token(mercuryKey, "mercury", "node-a"))
	c, err := fleetlockclient.New(strings.TrimSuffix(base, "/"), idA, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var rej *fleetlockclient.Rejection
	if err := c.SteadyState(context.Background()); !errors.As(err, &rej) || rej.Status != 401 || rej.Kind != KindFailedAuth {
		t.Fatalf("got %v", err)
	}
	auditLine(t, logs.take())
}

// TestCoordinatorFailures: an error is a generic 500 (the detail only
// in the log), no decision in time a 503, and a second request of a node
// being decided a 429; none of them is ever a grant.
func TestCoordinatorFailures(t *testing.T) {
	coord := &fakeCoordinator{}
	logs := &logBuffer{}
	s := newTestServer(coord, logs)
	s.timeout = 100 * time.Millisecond
	srv := httptest.NewServer(s)
	defer srv.Close()
	a := attempt{name: "pre-reboot", path: "mercury/node-a/" + Token(mercuryKey, "mercury", "node-a") + "/v1/pre-reboot", body: body(idA, "default")}

	coord.setDecide(func(context.Context, string, Request) (Decision, error) {
		return Decision{Granted: true}, errors.New("temporal: connection refused to frontend")
	})
	ans := send(t, srv, a)
	if ans.status != 500 || ans.perr.Kind != KindInternal || strings.Contains(ans.raw, "temporal") {
		t.Fatalf("coordinator error: %d %s", ans.status, ans.raw)
	}
	if m := auditLine(t, logs.take()); m["outcome"] != OutcomeError || !strings.Contains(m["reason"].(string), "connection refused") {
		t.Fatalf("audit line: %v", m)
	}

	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	coord.setDecide(func(ctx context.Context, _ string, _ Request) (Decision, error) {
		entered <- struct{}{}
		select {
		case <-release:
			return Decision{Granted: true}, nil
		case <-ctx.Done():
			return Decision{Granted: true}, ctx.Err()
		}
	})
	ans = send(t, srv, a)
	<-entered
	if ans.status != 503 || ans.perr.Kind != KindBusy || ans.header.Get("Retry-After") == "" {
		t.Fatalf("timeout: %d %s", ans.status, ans.raw)
	}
	if m := auditLine(t, logs.take()); m["outcome"] != OutcomeError {
		t.Fatalf("audit line: %v", m)
	}

	s.timeout = time.Minute
	firstStatus := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/fleetlock/"+a.path, strings.NewReader(a.body))
		req.Header.Set(ProtocolHeader, "true")
		resp, err := srv.Client().Do(req)
		if err != nil {
			firstStatus <- 0
			return
		}
		resp.Body.Close()
		firstStatus <- resp.StatusCode
	}()
	<-entered
	logs.take()
	second := send(t, srv, a)
	if second.status != 429 || second.perr.Kind != KindBusy {
		t.Fatalf("second request: %d %s", second.status, second.raw)
	}
	if m := auditLine(t, logs.take()); m["outcome"] != OutcomeWaiting {
		t.Fatalf("audit line: %v", m)
	}
	close(release)
	if st := <-firstStatus; st != 200 {
		t.Fatalf("first request: %d", st)
	}
	auditLine(t, logs.take())
	if n := len(coord.Calls()); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}

// TestNothingConfigured: without a Coordinator nothing is granted;
// without an inventory no node is set up; an inventory that fails is a
// generic 500.
func TestNothingConfigured(t *testing.T) {
	logs := &logBuffer{}
	pre := func(node string) string {
		return "/fleetlock/mercury/" + node + "/" + Token(mercuryKey, "mercury", node) + "/v1/pre-reboot"
	}
	for _, c := range []struct {
		name   string
		opts   Options
		path   string
		status int
		kind   string
	}{
		{"no coordinator", Options{Keys: testKeys, Nodes: testNodes}, pre("node-a"), 500, KindInternal},
		{"no inventory", Options{Keys: testKeys, Coordinator: &fakeCoordinator{}}, pre("node-a"), 403, KindUnknownNode},
		{"no keys", Options{Nodes: testNodes, Coordinator: &fakeCoordinator{}}, pre("node-a"), 401, KindFailedAuth},
		{"inventory error", Options{Keys: testKeys, Nodes: testNodes, Coordinator: &fakeCoordinator{}}, pre("node-err"), 500, KindInternal},
	} {
		c.opts.Logger = testLogger(logs)
		r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(body(idA, "default")))
		r.Header.Set(ProtocolHeader, "true")
		w := httptest.NewRecorder()
		New(c.opts).ServeHTTP(w, r)
		var pe protocolError
		if err := json.Unmarshal(w.Body.Bytes(), &pe); err != nil || w.Code != c.status || pe.Kind != c.kind || strings.Contains(w.Body.String(), "unreadable") {
			t.Fatalf("%s: %d %s", c.name, w.Code, w.Body)
		}
		auditLine(t, logs.take())
	}
}

func TestToken(t *testing.T) {
	a := Token(mercuryKey, "mercury", "node-a")
	if len(a) != 43 || strings.ContainsAny(a, "+/=") {
		t.Fatalf("not unpadded base64url of 32 bytes: %q", a)
	}
	if a != Token(mercuryKey, "mercury", "node-a") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{
		Token(mercuryKey, "venus", "node-a"),   // same key, other cluster
		Token(venusKey, "mercury", "node-a"),   // other key
		Token(mercuryKey, "mercury", "node-b"), // other node
		Token(mercuryKey, "mercury\x00node", "a"),
		Token(mercuryKey, "mercurynode-", "a"),
	} {
		if other == a {
			t.Fatalf("token collides: %q", other)
		}
	}
}

func TestBaseURL(t *testing.T) {
	for _, pub := range []string{"https://kedge.example:8443/fleetlock", "https://kedge.example:8443/fleetlock/"} {
		got := BaseURL(pub, "mercury", "node-a", "TOK")
		if got != "https://kedge.example:8443/fleetlock/mercury/node-a/TOK/" {
			t.Fatalf("BaseURL(%q) = %q", pub, got)
		}
	}
}

// TestPrefix: the handler answers under the prefix it is given, and
// nowhere else.
func TestPrefix(t *testing.T) {
	logs := &logBuffer{}
	s := New(Options{Prefix: "fl", Keys: testKeys, Nodes: testNodes, Coordinator: &fakeCoordinator{},
		Logger: testLogger(logs)})
	tok := Token(mercuryKey, "mercury", "node-a")
	for path, want := range map[string]int{
		"/fl/mercury/node-a/" + tok + "/v1/pre-reboot":        200,
		"/fleetlock/mercury/node-a/" + tok + "/v1/pre-reboot": 404,
	} {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body(idA, "default")))
		r.Header.Set(ProtocolHeader, "true")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != want {
			t.Fatalf("%s: %d, want %d: %s", path, w.Code, want, w.Body)
		}
		auditLine(t, logs.take())
	}
}
