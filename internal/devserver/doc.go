// Package devserver embeds a real Temporal server (SQLite persistence) and
// the Temporal Web UI in the calling process, for `kedge dev` and for the
// integration tests.
//
// It is tuned for one machine and low latency, not for load or high
// availability: team installs run a real Temporal cluster (see
// docker-compose.yml), never this package.
package devserver
