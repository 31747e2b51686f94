// Package attempt is the worker's half of a step's retries, now that
// Temporal runs them: the runbook workflow gives an action's activity a
// RetryPolicy of the step's backoff and maxAttempts plus Lost, and names
// it with the step's maxAttempts in its ID (ID: the ID is no payload, so
// nothing needs sealing, and it is what a front end matches pending
// attempts by); the Interceptor on every worker counts the step's failures in the
// heartbeat details, so that a lost attempt (a worker that died or
// hung) never spends one, and makes the failure that spends them final.
//
// The activity's own heartbeat details pass through untouched:
// activities record them with activity.RecordHeartbeat and read where an
// earlier attempt got to with resume.Load, which Temporal now hands to
// the next attempt itself.
//
// It imports nothing of Kedge's above internal/ but actions/errtype.
package attempt
