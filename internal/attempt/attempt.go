package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/resume"
)

// Lost is how many attempts of one action may be lost (a worker that
// died or hung: a missed heartbeat, or a timeout the activity did not
// see) on top of its step's maxAttempts: a lost attempt is no failure of
// the step. The workflow's RetryPolicy asks for the two added up.
const Lost = 5

// Detail is what the worker adds to an action's result, or to its final
// error's details, when the action took more than one attempt: the
// workflow sees only the attempt that ended.
type Detail struct {
	Attempt int `json:"kedgeAttempt"`
	// LastError is what ended the attempt before this one.
	LastError string `json:"kedgeLastError,omitempty"`
}

// Keys of Detail in a result (a JSON object).
const (
	AttemptKey   = "kedgeAttempt"
	LastErrorKey = "kedgeLastError"
)

// ledger is what the worker keeps in an action's heartbeat details: the
// step's failures so far and the activity's own details. Temporal hands
// the last heartbeat details to the next attempt, whatever ended the one
// before: a failure the worker counted here, or a lost attempt it never
// saw end.
type ledger struct {
	Kedge      int               `json:"kedgeLedger"` // 1
	Failures   int               `json:"failures"`
	LastFailed int               `json:"lastFailed,omitempty"` // the attempt that failed last
	LastError  string            `json:"lastError,omitempty"`
	Details    []json.RawMessage `json:"details,omitempty"`
}

// Interceptor keeps a step's retry policy on the worker while Temporal
// retries the step's action (the RetryPolicy the workflow builds, with
// MaximumAttempts the step's maxAttempts plus Lost):
//
//   - it counts the step's failures in the heartbeat details, beside the
//     activity's own (which the activity reads and writes as ever, with
//     activity.RecordHeartbeat and resume.Load), and makes the failure
//     that spends the step's maxAttempts final, so a lost attempt never
//     counts as one;
//   - it ends an attempt's work a moment before Temporal's start-to-close
//     timeout, so the timeout is a failure the worker counts, not a loss;
//   - it adds the attempt number and the error before it (Detail) to a
//     result or final error that took more than one attempt;
//   - it heartbeats every running action with a heartbeat timeout, four
//     times within it (keepAlive), so a live attempt is never taken for
//     lost and a lost one is noticed within that timeout.
//
// Activities of runs started before Temporal retried actions (one
// attempt each, MaximumAttempts 1, retried by the workflow) are only
// kept alive: for them the embedded resume.Interceptor carries a lost
// attempt's details to the next in the activity header. Register it on
// every worker.
type Interceptor struct {
	resume.Interceptor
}

// InterceptActivity keeps the ledger of each activity, inside the
// carrying of version-0 runs.
func (i *Interceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return i.Interceptor.InterceptActivity(ctx, &inbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}})
}

type inbound struct {
	interceptor.ActivityInboundInterceptorBase
	out *outbound
}

func (a *inbound) Init(next interceptor.ActivityOutboundInterceptor) error {
	a.out = &outbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: next}}
	return a.Next.Init(a.out)
}

// ID names the activity of one action call: its step, its host ("-"
// for none), the call's number in the run (unique in the run: the SDK
// refuses two activities of one ID in one workflow task) and the step's
// maxAttempts, which the worker keeps (budget). A front end matches a
// pending activity's attempts to its step and host with ParseID.
func ID(step, host string, n, maxAttempts int) string {
	if host == "" {
		host = "-"
	}
	return fmt.Sprintf("%s/%s#%d+%d", step, host, n, maxAttempts)
}

// ParseID reads an ID: the step, the host ("" for none) and the step's
// maxAttempts; ok is false for an activity ID Kedge did not make.
func ParseID(id string) (step, host string, maxAttempts int, ok bool) {
	step, rest, found := strings.Cut(id, "/")
	host, rest, found2 := strings.Cut(rest, "#")
	_, budget, found3 := strings.Cut(rest, "+")
	n, err := strconv.Atoi(budget)
	if !found || !found2 || !found3 || err != nil || n < 1 || step == "" || host == "" {
		return "", "", 0, false
	}
	if host == "-" {
		host = ""
	}
	return step, host, n, true
}

func (a *inbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	_, _, allowed, ours := ParseID(info.ActivityID)
	if !ours {
		stop := a.out.keepAlive(ctx, info.HeartbeatTimeout)
		defer stop()
		return a.Next.ExecuteActivity(ctx, in)
	}
	l := a.out.open(ctx)
	n := int(info.Attempt)
	before := l.LastError
	if n > 1 && l.LastFailed != n-1 {
		before = fmt.Sprintf("attempt %d lost: its worker stopped (no heartbeat within %s) or it did not end in %s", n-1, info.HeartbeatTimeout, info.StartToCloseTimeout)
	}
	work := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		work, cancel = context.WithDeadline(ctx, dl.Add(-margin(info.StartToCloseTimeout)))
		defer cancel()
	}
	stop := a.out.keepAlive(ctx, info.HeartbeatTimeout)
	res, err := a.Next.ExecuteActivity(work, in)
	stop()
	if err == nil {
		if n > 1 && res != nil {
			return annotated{v: res, d: Detail{Attempt: n, LastError: before}}, nil
		}
		return res, nil
	}
	if ctx.Err() != nil || temporal.IsCanceledError(err) || lost(err) {
		return nil, err // cancelled, or lost: not the step's failure
	}
	if work.Err() != nil && errors.Is(work.Err(), context.DeadlineExceeded) {
		err = temporal.NewApplicationErrorWithCause(fmt.Sprintf("did not end in %s", info.StartToCloseTimeout), errtype.AttemptTimeout, err)
	}
	l.Failures++
	if retryable(err) && l.Failures < allowed && n < allowed+Lost {
		// The next attempt starts over, as after any failure: what this
		// one got to may be what failed.
		l.LastFailed, l.LastError, l.Details = n, message(err), nil
		a.out.save(ctx, l)
		return nil, err
	}
	return nil, final(err, Detail{Attempt: n, LastError: before})
}

// margin is how long before Temporal's start-to-close timeout the worker
// ends an attempt's work itself.
func margin(startToClose time.Duration) time.Duration {
	return min(2*time.Second, startToClose/10)
}

// lost says whether an activity returned the timeout of a lost attempt
// (its heartbeat, as the server would end it).
func lost(err error) bool {
	var t *temporal.TimeoutError
	return errors.As(err, &t) && t.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
}

func retryable(err error) bool {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return !app.NonRetryable() && !slices.Contains(errtype.NotRetried(), app.Type())
	}
	return true
}

// message is err as the workflow shows it.
func message(err error) string { return err.Error() }

// final makes err the step's last failure: not retried by Temporal, with
// d in its details when it took more than one attempt and has none of
// its own (details of its own are kept as they are).
func final(err error, d Detail) error {
	if app, ok := err.(*temporal.ApplicationError); ok { // the error itself, not one it wraps
		own, has := detailsOf(app)
		if app.NonRetryable() && (d.Attempt <= 1 || has) {
			return err
		}
		opts := temporal.ApplicationErrorOptions{NonRetryable: true, Cause: app.Unwrap(), Details: own}
		if !has && d.Attempt > 1 {
			opts.Details = []any{d}
		}
		return temporal.NewApplicationErrorWithOptions(app.Message(), app.Type(), opts)
	}
	opts := temporal.ApplicationErrorOptions{NonRetryable: true, Cause: errors.Unwrap(err)}
	if d.Attempt > 1 {
		opts.Details = []any{d}
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), goType(err), opts)
}

// detailsOf returns the details an activity gave its error, as the
// values it gave (an error made in this process holds them unencoded).
func detailsOf(app *temporal.ApplicationError) ([]any, bool) {
	if !app.HasDetails() {
		return nil, false
	}
	var vals []any
	for n := 1; n <= 16; n++ {
		ptrs := make([]any, n)
		got := make([]any, n)
		for i := range ptrs {
			ptrs[i] = &got[i]
		}
		if app.Details(ptrs...) != nil {
			break
		}
		vals = got
	}
	return vals, true
}

// goType names err's type as Temporal does for an error that is no
// ApplicationError.
func goType(err error) string {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "errorString" {
		return ""
	}
	return t.Name()
}

// annotated is a result with Detail added to its JSON object.
type annotated struct {
	v any
	d Detail
}

func (a annotated) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(a.v)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return b, err // no object: nothing to add to
	}
	head, err := json.Marshal(a.d)
	if err != nil {
		return nil, err
	}
	if string(b) == "{}" {
		return head, nil
	}
	out := make([]byte, 0, len(head)+len(b))
	out = append(out, head[:len(head)-1]...)
	out = append(out, ',')
	return append(out, b[1:]...), nil
}

// TickEvery is how often the worker heartbeats a running action whose
// heartbeat timeout is timeout: four times within it, so that a slow
// heartbeat or two never makes a live attempt look lost (the worker's
// MaxHeartbeatThrottleInterval must not be longer).
func TickEvery(timeout time.Duration) time.Duration { return timeout / 4 }

// outbound keeps the ledger around the activity's own heartbeat details,
// and the last details for the keep-alive heartbeats.
type outbound struct {
	interceptor.ActivityOutboundInterceptorBase
	mu  sync.Mutex
	on  bool   // the ledger is kept (an action of a retried step)
	l   ledger // on: the ledger, with the activity's details
	raw []any  // off: the activity's last details, as given
}

// keepAlive heartbeats what the activity last heartbeated, every
// TickEvery(timeout), until stop: the attempt's worker is alive even
// while the action has no progress to report (a quick call, a long
// wait). A lost worker stops heartbeating, and Temporal retries the
// action on another once timeout passes.
func (o *outbound) keepAlive(ctx context.Context, timeout time.Duration) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(TickEvery(timeout))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				o.mu.Lock()
				if o.on {
					o.Next.RecordHeartbeat(ctx, o.l)
				} else {
					o.Next.RecordHeartbeat(ctx, o.raw...)
				}
				o.mu.Unlock()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// open reads the ledger the attempt before left (none: a new one). Details
// of another form (a worker before the ledger) are the activity's own.
func (o *outbound) open(ctx context.Context) ledger {
	l := ledger{Kedge: 1}
	defer func() {
		o.mu.Lock()
		o.on, o.l = true, l
		o.mu.Unlock()
	}()
	if !o.Next.HasHeartbeatDetails(ctx) {
		return l
	}
	var raw json.RawMessage
	if o.Next.GetHeartbeatDetails(ctx, &raw) != nil {
		return l
	}
	var got ledger
	if json.Unmarshal(raw, &got) == nil && got.Kedge == 1 {
		l = got
	} else {
		l.Details = []json.RawMessage{raw}
	}
	return l
}

// save records l as the heartbeat details; Temporal keeps them for the
// next attempt (the SDK sends a buffered heartbeat before the failure).
func (o *outbound) save(ctx context.Context, l ledger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.l = l
	o.Next.RecordHeartbeat(ctx, o.l)
}

func (o *outbound) RecordHeartbeat(ctx context.Context, details ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.on {
		o.raw = details
		o.Next.RecordHeartbeat(ctx, details...)
		return
	}
	raws := make([]json.RawMessage, 0, len(details))
	for _, d := range details {
		b, err := json.Marshal(d)
		if err != nil {
			activity.GetLogger(ctx).Warn("a heartbeat detail does not encode: not recorded", "error", err)
			return
		}
		raws = append(raws, b)
	}
	o.l.Details = raws
	o.Next.RecordHeartbeat(ctx, o.l)
}

func (o *outbound) HasHeartbeatDetails(ctx context.Context) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.on {
		return o.Next.HasHeartbeatDetails(ctx)
	}
	return len(o.l.Details) > 0
}

func (o *outbound) GetHeartbeatDetails(ctx context.Context, d ...any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.on {
		return o.Next.GetHeartbeatDetails(ctx, d...)
	}
	if len(o.l.Details) < len(d) {
		return temporal.ErrNoData
	}
	for i, v := range d {
		if err := json.Unmarshal(o.l.Details[i], v); err != nil {
			return fmt.Errorf("heartbeat detail %d: %w", i, err)
		}
	}
	return nil
}
