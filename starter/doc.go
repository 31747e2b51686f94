// Package starter is the kedge command line: validate, plan, run, watch,
// list, cancel and approve runbooks, run a worker, and `kedge dev`, the
// one-process Temporal server + Web UI + worker for a laptop.
//
// The app is built by NewApp with its IO streams injected so tests drive it
// exactly as an operator would. Every command that prints data accepts
// --output json. Exit codes: 0 success, 1 a runbook or input was bad or a
// runbook failed, 2 wrong usage, 3 Temporal could not be reached. Nothing
// here may start a workflow before its input has been validated.
package starter
