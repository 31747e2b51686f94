package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
)

// A result that took more than one attempt says so beside its own
// fields; one that is no JSON object is left as it is.
func TestAnnotatedAddsTheAttemptToAnObject(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{v: struct {
			Changed bool `json:"changed"`
		}{true}, want: `{"kedgeAttempt":3,"kedgeLastError":"boom","changed":true}`},
		{v: struct{}{}, want: `{"kedgeAttempt":3,"kedgeLastError":"boom"}`},
		{v: []int{1}, want: `[1]`},
	} {
		b, err := json.Marshal(annotated{v: tc.v, d: Detail{Attempt: 3, LastError: "boom"}})
		if err != nil || string(b) != tc.want {
			t.Errorf("%#v: %s, %v; want %s", tc.v, b, err, tc.want)
		}
	}
}

// The failure that spends a step's attempts is final (Temporal retries
// it no more), keeps its type, message and cause, and says on which
// attempt it came when that was not the first.
func TestFinalKeepsTypeAndCause(t *testing.T) {
	cause := errors.New("exit status 1")
	err := final(temporal.NewApplicationErrorWithCause("apt-get failed", "CommandFailed", cause), Detail{Attempt: 2, LastError: "lost"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != "CommandFailed" || app.Message() != "apt-get failed" || !errors.Is(err, cause) {
		t.Fatalf("final: %v", err)
	}
	var d Detail
	if app.Details(&d) != nil || d.Attempt != 2 {
		t.Errorf("details %+v, want attempt 2", d)
	}
	// A final error with details of its own keeps them.
	own := temporal.NewNonRetryableApplicationError("refused", "UpgradeRefused", nil, map[string]any{"problems": []string{"x"}})
	if got := final(own, Detail{Attempt: 2}); got != own {
		t.Errorf("a final error with its own details was rebuilt: %v", got)
	}
	// A retryable one made final keeps its details, its message once.
	pulled := temporal.NewApplicationErrorWithOptions("docker pull failed", "CommandFailed", temporal.ApplicationErrorOptions{
		Details: []any{map[string]any{"exitCode": 1}, "second"}})
	err = final(pulled, Detail{Attempt: 3})
	var got map[string]any
	var second string
	if !errors.As(err, &app) || !app.NonRetryable() || app.Details(&got, &second) != nil || got["exitCode"] != 1 || second != "second" ||
		err.Error() != "docker pull failed (type: CommandFailed, retryable: false)" {
		t.Errorf("made final: %v, details %v %q", err, got, second)
	}
	// A plain error keeps its message, and is final.
	err = final(errors.New("plain"), Detail{Attempt: 1})
	if !errors.As(err, &app) || !app.NonRetryable() || app.Message() != "plain" || app.HasDetails() {
		t.Errorf("plain: %v", err)
	}
}

// retryable refuses what the step's policy never retries, as the server
// does with NonRetryableErrorTypes.
func TestRetryableFollowsTheNotRetriedTypes(t *testing.T) {
	if retryable(temporal.NewApplicationError("bad", "InvalidInput")) {
		t.Error("InvalidInput counted retryable")
	}
	if !retryable(temporal.NewApplicationError("exit 1", "CommandFailed")) || !retryable(errors.New("x")) {
		t.Error("a plain failure counted final")
	}
	if retryable(temporal.NewNonRetryableApplicationError("no", "CommandFailed", nil)) {
		t.Error("a non-retryable failure counted retryable")
	}
}

// An action call's activity ID gives back its step, host and budget,
// whatever the host's name holds; IDs Kedge did not make read as none,
// and the worker leaves their activities alone.
func TestIDNamesItsStepHostAndBudget(t *testing.T) {
	for _, tc := range []struct {
		step, host string
		max        int
	}{{"swap", "worker-1", 3}, {"check", "", 1}, {"drain", "n1.example.com", 10}} {
		step, host, max, ok := ParseID(ID(tc.step, tc.host, 12, tc.max))
		if !ok || step != tc.step || host != tc.host || max != tc.max {
			t.Errorf("%q on %q (%d): read %q, %q, %d, %v", tc.step, tc.host, tc.max, step, host, max, ok)
		}
	}
	for _, id := range []string{"12", "", "swap", "swap/w1", "swap/w1#3", "/w1#3+1", "swap/w1#3+0", "swap/w1#3+x"} {
		if _, _, _, ok := ParseID(id); ok {
			t.Errorf("%q read as a Kedge action call", id)
		}
	}
}

// recorder is the SDK's side of the outbound interceptor: it keeps what
// was heartbeated.
type recorder struct {
	interceptor.ActivityOutboundInterceptorBase
	mu   sync.Mutex
	sent [][]any
}

func (r *recorder) RecordHeartbeat(_ context.Context, details ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, details)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// While an action runs, the worker heartbeats it with what it last
// heartbeated (the ledger, with the action's own details), with or
// without progress of its own, and stops when the action returns.
func TestKeepAliveHeartbeatsUntilStopped(t *testing.T) {
	r := &recorder{}
	o := &outbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: r}}
	o.on, o.l = true, ledger{Kedge: 1, Failures: 1}
	o.RecordHeartbeat(context.Background(), map[string]int{"evicted": 3})
	stop := o.keepAlive(context.Background(), 40*time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); r.count() < 4; {
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats in 30 s, want a tick every 10 ms", r.count())
		}
		runtime.Gosched()
	}
	stop()
	n := r.count()
	r.mu.Lock()
	last := r.sent[n-1]
	r.mu.Unlock()
	l, ok := last[0].(ledger)
	if len(last) != 1 || !ok || l.Failures != 1 || len(l.Details) != 1 || string(l.Details[0]) != `{"evicted":3}` {
		t.Errorf("a keep-alive heartbeat sent %#v, want the ledger with the action's details", last)
	}
	if o.keepAlive(context.Background(), 0)(); r.count() != n {
		t.Error("heartbeats after stop, or without a heartbeat timeout")
	}
}
