// Package runs is how a front end (the CLI, ChatOps) works with runs that
// are under way: read a run's progress (with its rollouts' items filled
// in), find what it waits on a person for at any depth of child runbooks
// and rollouts, and send a decision there. The CLI and chat use the same
// code, so a nested approval is decided the same way from either. How the
// progress is shown is workflows.NewView's, for every front end.
package runs
