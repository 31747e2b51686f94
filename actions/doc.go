// Package actions is the table of every action a runbook step can name:
// its inputs and outputs (read from its input and result types), what it
// targets, the timeouts and heartbeat the workflow gives it, and the line
// the Web UI shows for one call of it.
//
// Each action is declared here once. The runbook validator, the
// workflow, `kedge actions` and the UI summaries read this table; the
// activity packages implement it; the worker wires implementations to
// names and checks their types against it. The package is pure data: the
// workflow reads it, so it never does I/O and never depends on map order.
package actions
