package workflows

import (
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/internal/resume"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/expr"
)

// retriesChange is the workflow.GetVersion change id of Temporal retrying
// actions (version 1): an action's activity carries a RetryPolicy made of
// its step's retry, and the server runs every attempt. Runs started
// before it run each attempt as an activity of its own, retried here
// (version 0, callActionLoop), and finish that way.
const retriesChange = "temporal-retries"

// callsKey holds, on a workflow's context, the number of action calls
// it made so far (attempt.ID).
type callsKey struct{}

// withCalls starts a workflow's count of action calls.
func withCalls(ctx workflow.Context) workflow.Context {
	return workflow.WithValue(ctx, callsKey{}, new(int))
}

// nextCall numbers an action call; 0 when ctx does not count them.
func nextCall(ctx workflow.Context) int {
	n, ok := ctx.Value(callsKey{}).(*int)
	if !ok {
		return 0
	}
	*n++
	return *n
}

// retryPolicy is the server's retry policy of one action of a step: the
// step's backoff, its maxAttempts plus attempt.Lost, and never again
// after a refusal made before anything changed (errtype.NotRetried).
func retryPolicy(retry runbooks.Retry) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        retry.InitialInterval,
		BackoffCoefficient:     retry.Backoff,
		MaximumInterval:        retry.MaxInterval,
		MaximumAttempts:        int32(retry.MaxAttempts + attempt.Lost),
		NonRetryableErrorTypes: errtype.NotRetried(),
	}
}

// callAction runs one rendered action under the step's retry policy and
// returns its result, the attempts it took and its error.
func callAction(ctx workflow.Context, s *stepRun, action actions.Action, host string, input map[string]any) (any, int, error) {
	timeout := s.spec.Timeout
	if timeout == 0 {
		timeout = action.Timeout
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    action.Heartbeat,
		WaitForCancellation: true,
		Summary:             activitySummary(s.spec.ID, action, host, input),
	}
	if workflow.GetVersion(ctx, retriesChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return callActionLoop(ctx, s, action, host, input, opts)
	}
	retry := s.spec.Retry.WithDefaults()
	opts.RetryPolicy = retryPolicy(retry)
	for forged := 0; ; forged++ {
		if n := nextCall(ctx); n > 0 {
			opts.ActivityID = attempt.ID(s.spec.ID, host, n, retry.MaxAttempts)
		}
		var out map[string]any
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), action.Name, input).Get(ctx, &out)
		if err == nil {
			n := 1
			if a, ok := out[attempt.AttemptKey].(float64); ok && a > 1 {
				n = int(a)
				if e, ok := out[attempt.LastErrorKey].(string); ok && e != "" {
					s.p.LastError = e
					if host != "" {
						s.p.LastError = host + ": " + e
					}
				}
			}
			delete(out, attempt.AttemptKey)
			delete(out, attempt.LastErrorKey)
			return expr.Normalize(out), n + forged, nil
		}
		s.p.LastError = errorMessage(err)
		if host != "" {
			s.p.LastError = host + ": " + s.p.LastError
		}
		// A failure the step's queue did not vouch for (another site's
		// worker answered the task: internal/codec) is no failure of
		// the step: run it again at once, a bounded number of times.
		if ctx.Err() == nil && refused(err) && forged < attempt.Lost {
			continue
		}
		return nil, attemptOf(err, opts.RetryPolicy.MaximumAttempts) + forged, err
	}
}

// attemptOf reads the attempt a final error ended on: the worker's
// attempt.Detail, else max when Temporal gave up for attempts (the last
// one lost: no worker saw it end), else 1.
func attemptOf(err error, max int32) int {
	var app *temporal.ApplicationError
	var d attempt.Detail
	if errors.As(err, &app) && app.HasDetails() && app.Details(&d) == nil && d.Attempt > 1 {
		return d.Attempt
	}
	var act *temporal.ActivityError
	if errors.As(err, &act) && act.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
		return int(max)
	}
	return 1
}

// callActionLoop is the path of runs started before retriesChange: each
// attempt is an activity of its own (MaximumAttempts 1), retried here.
func callActionLoop(ctx workflow.Context, s *stepRun, action actions.Action, host string, input map[string]any, opts workflow.ActivityOptions) (any, int, error) {
	retry := s.spec.Retry.WithDefaults()
	opts.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 1}
	actx := workflow.WithActivityOptions(ctx, opts)
	failures, lost, forged := 0, 0, 0
	next := actx // the next attempt's context
	for n := 1; ; n++ {
		var out map[string]any
		err := workflow.ExecuteActivity(next, action.Name, input).Get(ctx, &out)
		if err == nil {
			return expr.Normalize(out), n + forged, nil
		}
		s.p.LastError = errorMessage(err)
		if host != "" {
			s.p.LastError = host + ": " + s.p.LastError
		}
		if ctx.Err() != nil {
			return nil, n, err
		}
		// A missed heartbeat means the worker running the attempt died
		// or hung, not that the step failed: run it again at once,
		// without counting it against the step's maxAttempts, and
		// hand it the lost attempt's last heartbeat details, so a long
		// action resumes where it got to (resume.After).
		if workerLost(err) && lost < attempt.Lost {
			lost++
			next = resume.After(next, err)
			continue
		}
		if refused(err) && forged < attempt.Lost {
			forged++
			next = actx
			continue
		}
		next = actx // an attempt after a failure starts over
		failures++
		if !retryable(err) || failures >= retry.MaxAttempts {
			return nil, n, err
		}
		if err := workflow.NewTimer(ctx, retry.Delay(failures)).Get(ctx, nil); err != nil {
			return nil, n, err
		}
	}
}

func workerLost(err error) bool {
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
}

func refused(err error) bool {
	return errtype.Is(err, errtype.RefusedFailure)
}

func retryable(err error) bool {
	if temporal.IsCanceledError(err) {
		return false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return !app.NonRetryable()
	}
	return true
}
