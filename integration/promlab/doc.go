// Package promlab starts a real Prometheus server on loopback for Kedge's
// tests, built from the Go module proxy by scripts/prometheus-tools.sh,
// and serves the metrics it scrapes.
//
// A server gets its own temporary directory (its configuration, rule
// file and TSDB), a free loopback port, the rule file and scrape targets
// the test gives, and short intervals set in its own configuration
// (Options.Interval, 1s by default, for scrapes and rule evaluation
// alike), so an alert whose rule has `for: 0s` fires within about two
// intervals of its condition turning true. Start returns once /-/ready
// answers 200.
//
// Gauge serves a /metrics endpoint in the test process holding gauges
// the test sets: a target whose value a rule alerts on.
//
// Stop (registered as a test Cleanup by StartT) kills the server's
// process group, waits for it to exit and removes its directory, also
// when the test failed: no process is left behind.
//
// It is test infrastructure; it must never hold anything that matters.
package promlab
