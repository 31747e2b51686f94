// Package prometheus declares prometheus.alerts, the action that asks a
// Prometheus server which alerts of a given set are firing: its name, its
// input and result types, and the check of the URL it is given (the
// rollout's alert gate checks the URL with it before a run starts).
//
// It is pure data: it must never import the Temporal SDK or anything that
// does I/O, so the action table, the runbook language and the workflow
// can name the action without linking it. The action is implemented by
// kedge.dev/kedge/activities/promapi.
package prometheus
