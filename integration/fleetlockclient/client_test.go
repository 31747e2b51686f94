package fleetlockclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// seen is a request as the protocol server received it.
type seen struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// semaphore is a FleetLock server as the protocol describes it: a
// counting semaphore of reboot slots, each owned by a client ID, whose
// lock and unlock are recursive. It refuses what the protocol forbids.
type semaphore struct {
	mu      sync.Mutex
	slots   int
	holders map[string]bool
	seen    []seen
	// answer, when set, answers a request instead (status, body).
	answer func(endpoint string, n int) (int, string)
}

func newSemaphore(slots int) *semaphore {
	return &semaphore{slots: slots, holders: map[string]bool{}}
}

func (s *semaphore) reply(w http.ResponseWriter, status int, kind, value string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"kind": kind, "value": value})
}

func (s *semaphore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, seen{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: data})
	endpoint := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	if s.answer != nil {
		if status, body := s.answer(endpoint, len(s.seen)); status != 0 {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
	}
	if r.Method != http.MethodPost {
		s.reply(w, http.StatusMethodNotAllowed, "bad_method", "POST only")
		return
	}
	if r.Header.Get("fleet-lock-protocol") != "true" {
		s.reply(w, http.StatusBadRequest, "no_protocol_header", "fleet-lock-protocol: true is required")
		return
	}
	var b struct {
		ClientParams struct {
			ID    string `json:"id"`
			Group string `json:"group"`
		} `json:"client_params"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || b.ClientParams.ID == "" || b.ClientParams.Group == "" {
		s.reply(w, http.StatusBadRequest, "bad_body", "client_params.id and client_params.group are required")
		return
	}
	id := b.ClientParams.ID
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/pre-reboot"):
		if !s.holders[id] && len(s.holders) >= s.slots {
			s.reply(w, http.StatusConflict, "slots_taken", "every reboot slot is taken")
			return
		}
		s.holders[id] = true
	case strings.HasSuffix(r.URL.Path, "/v1/steady-state"):
		delete(s.holders, id)
	default:
		s.reply(w, http.StatusNotFound, "no_endpoint", "no such endpoint")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *semaphore) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.seen...)
}

func (s *semaphore) hold(id string, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held {
		s.holders[id] = true
	} else {
		delete(s.holders, id)
	}
}

func (s *semaphore) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holders[id]
}

const nodeID = "c988d2509fdf4cdcbed39037c56406fb"

func newClient(t *testing.T, srv *httptest.Server, group string) *Client {
	t.Helper()
	c, err := New(srv.URL+"/base/", nodeID, group, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWireFormat: the request is Zincati's, byte for byte where it
// matters: POST, the protocol header, no Content-Type, the body indented
// as Zincati's serializer indents it.
func TestWireFormat(t *testing.T) {
	sem := newSemaphore(1)
	srv := httptest.NewServer(sem)
	defer srv.Close()
	c := newClient(t, srv, "")
	if err := c.SteadyState(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := sem.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	want := "{\n  \"client_params\": {\n    \"id\": \"" + nodeID + "\",\n    \"group\": \"default\"\n  }\n}"
	if r.Method != http.MethodPost || r.Path != "/base/v1/steady-state" || r.Header.Get("fleet-lock-protocol") != "true" ||
		r.Header.Get("Content-Type") != "" || r.Header.Get("Authorization") != "" || string(r.Body) != want {
		t.Fatalf("request: %s %s %v %q", r.Method, r.Path, r.Header, r.Body)
	}
}

// TestStateMachine walks an update: initialization, steady, an update
// staged, pre-reboot refused while the slots are taken, granted, the
// reboot, and the slot released; a step out of order sends nothing.
func TestStateMachine(t *testing.T) {
	sem := newSemaphore(1)
	srv := httptest.NewServer(sem)
	defer srv.Close()
	ctx := context.Background()
	c := newClient(t, srv, "workers")
	state := func(want State) {
		t.Helper()
		if got := c.State(); got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
	}
	outOfOrder := func(err error) {
		t.Helper()
		if !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("want ErrOutOfOrder, got %v", err)
		}
	}

	state(StateInitialization)
	_, _, err := c.PreReboot(ctx)
	outOfOrder(err)
	outOfOrder(c.UpdateStaged())
	outOfOrder(c.Reboot())
	if n := len(sem.requests()); n != 0 {
		t.Fatalf("out of order steps sent %d requests", n)
	}

	// A slot held before a restart is released at initialization.
	sem.hold(nodeID, true)
	if err := c.SteadyState(ctx); err != nil {
		t.Fatal(err)
	}
	state(StateSteady)
	if sem.holds(nodeID) {
		t.Fatal("initialization did not release the slot")
	}
	outOfOrder(c.SteadyState(ctx))

	if err := c.UpdateStaged(); err != nil {
		t.Fatal(err)
	}
	state(StatePreReboot)
	sem.hold("another-node", true)
	granted, reason, err := c.PreReboot(ctx)
	var rej *Rejection
	if granted || reason != "every reboot slot is taken" || !errors.As(err, &rej) ||
		rej.Status != http.StatusConflict || rej.Kind != "slots_taken" || rej.Endpoint != "pre-reboot" {
		t.Fatalf("full semaphore: %v %q %v", granted, reason, err)
	}
	state(StatePreReboot)

	sem.hold("another-node", false)
	if granted, _, err := c.PreReboot(ctx); !granted || err != nil {
		t.Fatalf("free slot: %v %v", granted, err)
	}
	state(StateFinalization)
	if !sem.holds(nodeID) {
		t.Fatal("granted without holding the slot")
	}
	_, _, err = c.PreReboot(ctx)
	outOfOrder(err)

	if err := c.Reboot(); err != nil {
		t.Fatal(err)
	}
	state(StateInitialization)
	if err := c.SteadyState(ctx); err != nil {
		t.Fatal(err)
	}
	state(StateSteady)
	if sem.holds(nodeID) {
		t.Fatal("steady-state after the reboot did not release the slot")
	}
	want := []string{"/base/v1/steady-state", "/base/v1/pre-reboot", "/base/v1/pre-reboot", "/base/v1/steady-state"}
	reqs := sem.requests()
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	for i, r := range reqs {
		if r.Path != want[i] || !bytes.Contains(r.Body, []byte(`"group": "workers"`)) {
			t.Fatalf("request %d: %s %s", i, r.Path, r.Body)
		}
	}
}

// TestLockUntilGranted: the loop asks again every interval while the
// slots are taken and stops at the grant.
func TestLockUntilGranted(t *testing.T) {
	sem := newSemaphore(1)
	sem.hold("another-node", true)
	sem.answer = func(endpoint string, n int) (int, string) {
		if endpoint == "pre-reboot" && n == 4 {
			delete(sem.holders, "another-node") // the other node came back
		}
		return 0, ""
	}
	srv := httptest.NewServer(sem)
	defer srv.Close()
	ctx := context.Background()
	c := newClient(t, srv, "")
	if err := c.SteadyState(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateStaged(); err != nil {
		t.Fatal(err)
	}
	if err := c.LockUntilGranted(ctx, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if c.State() != StateFinalization {
		t.Fatalf("state %s", c.State())
	}
	n := len(sem.requests())
	if n != 4 { // steady-state, two refusals, the grant
		t.Fatalf("%d requests, want 4", n)
	}
	time.Sleep(30 * time.Millisecond)
	if len(sem.requests()) != n {
		t.Fatal("the loop went on after the grant")
	}
}

// TestLockUntilContextEnds: never granted, the loop ends with its
// context, saying the last reason, and sends nothing more.
func TestLockUntilContextEnds(t *testing.T) {
	sem := newSemaphore(1)
	sem.hold("another-node", true)
	srv := httptest.NewServer(sem)
	defer srv.Close()
	c := newClient(t, srv, "")
	if err := c.SteadyState(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateStaged(); err != nil {
		t.Fatal(err)
	}
	// The context ends once the server refused three times, whenever
	// that is on a busy machine, perhaps with a fourth request on its way.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for len(sem.requests()) < 3 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	err := c.LockUntilGranted(ctx, 10*time.Millisecond)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "every reboot slot is taken") {
		t.Fatalf("got %v", err)
	}
	n := len(sem.requests())
	if n < 3 {
		t.Fatalf("only %d requests: the loop did not retry", n)
	}
	time.Sleep(30 * time.Millisecond)
	if len(sem.requests()) != n {
		t.Fatal("the loop went on after its context ended")
	}
	if c.State() != StatePreReboot {
		t.Fatalf("state %s", c.State())
	}
	if err := c.LockUntilGranted(context.Background(), 0); err == nil {
		t.Fatal("a zero interval was taken")
	}
}

// TestRejections: an answer that is not the protocol's error value is a
// generic one; any status but 200 is a failure, 2xx too; a failed
// steady-state leaves the client in initialization, and
// UnlockUntilAcknowledged asks again until acknowledged.
func TestRejections(t *testing.T) {
	sem := newSemaphore(1)
	sem.answer = func(endpoint string, n int) (int, string) {
		switch n {
		case 1:
			return http.StatusServiceUnavailable, "<html>bad gateway</html>"
		case 2:
			return http.StatusNoContent, ""
		case 3:
			return http.StatusInternalServerError, `{"kind": "", "value": "no kind"}`
		}
		return 0, ""
	}
	srv := httptest.NewServer(sem)
	defer srv.Close()
	c := newClient(t, srv, "")
	err := c.SteadyState(context.Background())
	var rej *Rejection
	if !errors.As(err, &rej) || rej.Status != 503 || rej.Kind != "generic_http_503" || rej.Value == "" {
		t.Fatalf("non-JSON answer: %v", err)
	}
	if err := c.SteadyState(context.Background()); !errors.As(err, &rej) || rej.Status != 204 {
		t.Fatalf("204 taken as success: %v", err)
	}
	if c.State() != StateInitialization {
		t.Fatalf("state %s", c.State())
	}
	if err := c.UnlockUntilAcknowledged(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := len(sem.requests()); n != 4 || c.State() != StateSteady {
		t.Fatalf("%d requests, state %s", n, c.State())
	}
}

// TestBaseURL: the endpoints are resolved against the base URL as a
// relative reference, as Zincati resolves them: without its trailing
// slash, the base URL's last segment is lost.
func TestBaseURL(t *testing.T) {
	sem := newSemaphore(1)
	srv := httptest.NewServer(sem)
	defer srv.Close()
	for base, want := range map[string]string{
		srv.URL + "/fleetlock/c/n/tok/": "/fleetlock/c/n/tok/v1/steady-state",
		srv.URL + "/fleetlock/c/n/tok":  "/fleetlock/c/n/v1/steady-state",
		srv.URL:                         "/v1/steady-state",
	} {
		c, err := New(base, nodeID, "", srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SteadyState(context.Background()); err != nil {
			t.Fatal(err)
		}
		reqs := sem.requests()
		if got := reqs[len(reqs)-1].Path; got != want {
			t.Fatalf("base %s: path %s, want %s", base, got, want)
		}
	}
	for _, bad := range []struct{ base, id string }{{"/relative/", nodeID}, {"http://x/%zz", nodeID}, {srv.URL + "/", ""}} {
		if _, err := New(bad.base, bad.id, "", nil); err == nil {
			t.Fatalf("New(%q, %q) took it", bad.base, bad.id)
		}
	}
}

// TestServerGone: a request that gets no answer is an error of its own,
// not a Rejection, and changes no state.
func TestServerGone(t *testing.T) {
	srv := httptest.NewServer(newSemaphore(1))
	c := newClient(t, srv, "")
	srv.Close()
	err := c.SteadyState(context.Background())
	var rej *Rejection
	if err == nil || errors.As(err, &rej) || c.State() != StateInitialization {
		t.Fatalf("got %v, state %s", err, c.State())
	}
}
