// Package metrics exposes a worker's Prometheus metrics and health over
// HTTP: the Temporal SDK's own metrics (workflow and activity task
// latencies, failures, poller counts, sticky cache) through a tally scope,
// and Kedge's counters (steps run and failed, nodes rolled) that the
// worker's interceptors add through the same handler.
//
// It serves GET /metrics (Prometheus text format) and GET /healthz (200
// while the worker's Temporal frontend answers, 503 with the reason
// otherwise). It must never label a metric with anything unbounded or
// secret: node names, params and outputs stay out; cluster and runbook
// names are the finest labels.
package metrics
