// Package worker wires a Kedge worker: it registers the runbook workflow and
// every action's activity on a Temporal worker, with the clients those
// activities hold (the SSH pool today).
//
// A worker is stateless: any number of them can poll the same task queue.
// It must never hold runbook state outside Temporal.
package worker
