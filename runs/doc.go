// Package runs is the one front door of runs for every front end (the
// CLI, ChatOps, webhooks, schedules): Prepare makes a start ready (the
// inventory, the runbook and its params, refused with a typed
// PrepareError), Start starts it, and Holders is the one rule of
// exclusivity (one run of a runbook per cluster at a time), asked by each
// run's admission. It is also how a front end works with runs that are
// under way: read a run's progress (with its rollouts' items filled
// in), find what it waits on a person for at any depth of child runbooks
// and rollouts, and send a decision there. The CLI and chat use the same
// code, so a nested approval is decided the same way from either. How the
// progress is shown is workflows.NewView's, for every front end.
package runs
