// Package runbooks is Kedge's runbook language: the spec types, a strict
// YAML loader that keeps source positions, the validator that rejects a bad
// runbook before anything starts, parameter resolution and the pure planner
// that shows which step runs where.
//
// A runbook (`kind: Runbook`) is a DAG of steps. Each step runs an action
// (an activity, see package catalog), a child runbook, or waits for an
// operator's approval; `needs` orders them, `when` skips them, `with` feeds
// them inputs with `${ cel }` interpolation, `retry`/`timeout` bound them and
// `undo` compensates them when the runbook fails.
//
// Everything here is pure: the loader reads files, but the types it produces
// are plain data that the workflow receives as input. Nothing in this
// package talks to Temporal, hosts or clusters.
package runbooks
