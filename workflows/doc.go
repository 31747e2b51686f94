// Package workflows holds Kedge's Temporal workflows: the DAG executor that
// runs one runbook (Runbook), its progress query and its approval update.
//
// Workflow code is deterministic: it never does I/O, never reads the clock
// but through workflow.Now, never iterates a map in random order and starts
// goroutines only with workflow.Go. Everything that touches the world is an
// activity (package activities/...). The workflow receives the validated
// runbook, its params and an inventory snapshot as input and never reads a
// file, so replay is stable and editing YAML cannot change a running
// runbook. Replay tests in this package guard it: a change that would break
// running workflows must go behind workflow.GetVersion.
package workflows
