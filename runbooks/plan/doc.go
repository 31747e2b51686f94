// Package plan decides what a runbook run does: which action runs on which
// host, on which task queue, with which inputs, and which params each child
// runbook gets.
//
// The same functions serve both sides of a run. Compile applies them ahead
// of time, with no step finished yet, and is what `kedge plan` prints and
// what the CLI and ChatOps check before they start anything. The runbook
// and rollout workflows apply them again as steps become ready, now with
// the finished steps' outputs, so what runs is what the plan said, except
// for the parts the plan marks as known only at run time.
//
// Everything here is deterministic and free of I/O: the workflows call it.
package plan
