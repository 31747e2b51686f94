package fleetlock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// The test world: two clusters with their keys, a few nodes in each.
var (
	mercuryKey = []byte("mercury-key-0123456789abcdef-0123")
	venusKey   = []byte("venus-key-0123456789abcdef-012345")
	keys       = map[string][]byte{
		"mercury": mercuryKey,
		"venus":   venusKey,
		"short":   []byte("too-short"),
	}
	nodes = map[string]NodeInfo{
		"mercury/node-a": {ClientID: "0123456789abcdef0123456789abcdef"},
		"mercury/node-b": {ClientID: "fedcba9876543210fedcba9876543210", Group: "workers"},
		"mercury/node-c": {}, // in the inventory, not set up for FleetLock
		"venus/node-a":   {ClientID: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		"short/node-a":   {ClientID: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
	}
	errKeyStore = errors.New("key store unreachable")
)

func testKeys(cluster string) ([]byte, error) {
	if cluster == "broken" {
		return nil, errKeyStore
	}
	return keys[cluster], nil
}

func testNodes(cluster, node string) (NodeInfo, error) {
	if cluster == "mercury" && node == "node-err" {
		return NodeInfo{}, errors.New("inventory unreadable")
	}
	return nodes[cluster+"/"+node], nil
}

// allTokens is every token of the world, and some of nodes that do not
// exist: none may ever be logged.
func allTokens() []string {
	var out []string
	for _, c := range []string{"mercury", "venus", "short", "broken", "pluto"} {
		for _, n := range []string{"node-a", "node-b", "node-c", "node-err"} {
			for _, k := range [][]byte{mercuryKey, venusKey, keys["short"]} {
				out = append(out, Token(k, c, n))
			}
		}
	}
	return out
}

// fakeCoordinator decides as told and records what it was asked.
type fakeCoordinator struct {
	mu    sync.Mutex
	calls []call
	// decide answers a call; nil grants.
	decide func(ctx context.Context, endpoint string, r Request) (Decision, error)
}

type call struct {
	Endpoint string
	Request  Request
}

func (f *fakeCoordinator) PreReboot(ctx context.Context, r Request) (Decision, error) {
	return f.record(ctx, EndpointPreReboot, r)
}

func (f *fakeCoordinator) SteadyState(ctx context.Context, r Request) (Decision, error) {
	return f.record(ctx, EndpointSteadyState, r)
}

func (f *fakeCoordinator) record(ctx context.Context, endpoint string, r Request) (Decision, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{endpoint, r})
	decide := f.decide
	f.mu.Unlock()
	if decide == nil {
		return Decision{Granted: true}, nil
	}
	return decide(ctx, endpoint, r)
}

func (f *fakeCoordinator) setDecide(d func(ctx context.Context, endpoint string, r Request) (Decision, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decide = d
}

func (f *fakeCoordinator) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// logBuffer holds a server's log lines (JSON).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns the lines logged since the last take.
func (b *logBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

func newTestServer(coord *fakeCoordinator, logs *logBuffer) *Server {
	var c Coordinator
	if coord != nil {
		c = coord
	}
	return New(Options{
		Keys:        testKeys,
		Nodes:       testNodes,
		Coordinator: c,
		Logger:      testLogger(logs),
	})
}

func testLogger(logs *logBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// auditLine checks that logged is exactly one audit line holding no
// token, and returns its fields.
func auditLine(t testing.TB, logged string) map[string]any {
	t.Helper()
	for _, tok := range allTokens() {
		if strings.Contains(logged, tok) {
			t.Fatalf("a token is in the log: %s", logged)
		}
	}
	if strings.Contains(logged, "Bearer ") || strings.Contains(logged, "Basic ") {
		t.Fatalf("an Authorization header is in the log: %s", logged)
	}
	lines := strings.Split(strings.TrimSpace(logged), "\n")
	if len(lines) != 1 || lines[0] == "" {
		t.Fatalf("want exactly one log line, got %d: %q", len(lines), logged)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("log line is not JSON: %v: %s", err, lines[0])
	}
	if m["audit"] != true {
		t.Fatalf("log line is not an audit line: %s", lines[0])
	}
	return m
}
