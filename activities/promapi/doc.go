// Package promapi holds prometheus.alerts, which asks a Prometheus
// server's HTTP API (/api/v1/alerts) which alerts of a given set are
// firing: the rollout's alert gate runs it before it starts an item, and
// a runbook step can run it like any action.
//
// It only reads: one GET of the alerts API, no credentials sent, no
// redirect followed, the answer's size bounded. It must never send a
// worker's file or token to the URL it is given: the URL comes from a
// run's params. The action's name and its input and result types are
// declared in kedge.dev/kedge/actions/prometheus (pure data).
package promapi
