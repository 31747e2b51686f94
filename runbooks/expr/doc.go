// Package expr evaluates the expressions of a runbook: `when:` conditions and
// `${ ... }` interpolations inside `with:` values, written in CEL (the
// Common Expression Language Kubernetes uses).
//
// Expressions see five variables: params (the runbook's resolved
// parameters), steps (for every finished step: state and outputs), cluster
// (the inventory snapshot), host (the node a host step is running on) and
// item (the current rollout item). CEL has no clock, no I/O and no
// randomness, so evaluation is deterministic and safe inside workflow code.
// This package must never add a function that breaks that.
//
// Evaluation is bounded (limits.go): a render spends at most CostLimit
// units of work, metered as it runs (meter.go) and charged before any call
// whose work is a product of its inputs' sizes, and hands back at most
// MaxResultBytes and MaxResultItems; past either it stops with
// ErrCostLimit, deterministically, so a replay stops where the run did.
// Check refuses, before a runbook runs, an expression whose estimated cost
// is over CostLimit whatever its inputs (estimate.go). No wall clock is
// used: a deadline would stop a run and not its replay.
package expr
