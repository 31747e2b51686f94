// Package check declares kedge.check, the action that stops a runbook
// when a condition does not hold (a guard): its name and its input and
// result types.
//
// It is pure data: it must never import the Temporal SDK or anything that
// does I/O, so the action table, the runbook language and the workflow
// can name the action without linking it. The action is implemented by
// kedge.dev/kedge/activities/guard.
package check
