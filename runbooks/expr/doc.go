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
package expr
