package workflows

import (
	"time"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
)

// RunbookWorkflow is the workflow type that runs one runbook.
const RunbookWorkflow = "runbook"

// Names of the query and update a running runbook answers.
const (
	ProgressQuery   = "progress"
	ApproveUpdate   = "approve"
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// RunbookInput is everything a runbook run needs; the workflow never reads
// files.
type RunbookInput struct {
	Runbook  runbooks.Runbook            `json:"runbook"`
	Children map[string]runbooks.Runbook `json:"children,omitempty"`
	Params   map[string]any              `json:"params"`
	Cluster  inventory.Cluster           `json:"cluster"`
	// Admission says who started the run: checked before the first step.
	Admission Admission `json:"admission"`
	// Preview runs only what the runbook's preview gate needs, then shows
	// the gate's prompt and ends: nothing after the gate runs, whatever
	// its when says (`kedge plan --live`).
	Preview bool `json:"preview,omitempty"`
}

// RunbookResult is what a finished runbook returns.
type RunbookResult struct {
	Progress Progress `json:"progress"`
	// Compensation undoes the run, newest step first: a rollout that is
	// aborted runs it for the items that completed.
	Compensation []UndoCall `json:"compensation,omitempty"`
}

// UndoCall is one rendered undo action.
type UndoCall struct {
	Step    string          `json:"step"`
	Action  string          `json:"action"`
	Host    string          `json:"host,omitempty"`
	Input   map[string]any  `json:"input,omitempty"`
	Error   string          `json:"error,omitempty"` // the undo could not be rendered
	Retry   *runbooks.Retry `json:"retry,omitempty"`
	Timeout time.Duration   `json:"timeout,omitempty"`
	// TaskQueue is where the undo runs: the site of its host.
	TaskQueue string `json:"taskQueue,omitempty"`
}

// Run states.
const (
	StatePending    = "pending"
	StateRunning    = "running"
	StateWaiting    = "waiting"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"
	StateSkipped    = "skipped"
	StateCancelled  = "cancelled"
	StateNotRun     = "not-run"
	StateUndoing    = "undoing"
	StateUndone     = "undone"
	StateUndoFailed = "undo-failed"
)

// Progress is the answer to the progress query.
type Progress struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId,omitempty"`
	// Nonce is a paused rollout's: a decision must carry it.
	Nonce string `json:"nonce,omitempty"`
	// Restore: the paused rollout also takes DecisionRestore (the
	// runbook that runs it has restore steps).
	Restore bool   `json:"restore,omitempty"`
	Runbook string `json:"runbook"`
	Cluster string `json:"cluster"`
	// Preview: the run went only as far as its preview gate.
	Preview   bool           `json:"preview,omitempty"`
	State     string         `json:"state"`
	StartedAt time.Time      `json:"startedAt"`
	EndedAt   *time.Time     `json:"endedAt,omitempty"`
	Error     string         `json:"error,omitempty"`
	Steps     []StepProgress `json:"steps"`
	// Waiting says why a rollout starts no item now although it could:
	// its window is closed ("waiting for the next window: Sat 02:00
	// UTC"), its delay between items runs, or its alerts fire. On a
	// rollout its alert gate paused, it says why (AlertPause).
	Waiting string `json:"waiting,omitempty"`
	// AlertPause numbers the pause of a rollout its alert gate paused
	// (the rollout's pauses counted from 1); 0 for any other state.
	AlertPause int `json:"alertPause,omitempty"`
	// Outputs are the runbook's outputs, rendered as the run ended;
	// OutputErrors says why one could not be (a step it reads did not
	// run).
	Outputs      map[string]any    `json:"outputs,omitempty"`
	OutputErrors map[string]string `json:"outputErrors,omitempty"`
}

// StepProgress is one step's state.
type StepProgress struct {
	ID        string         `json:"id"`
	Kind      string         `json:"kind"`
	Action    string         `json:"action,omitempty"`
	State     string         `json:"state"`
	Attempts  int            `json:"attempts"`
	StartedAt *time.Time     `json:"startedAt,omitempty"`
	EndedAt   *time.Time     `json:"endedAt,omitempty"`
	LastError string         `json:"lastError,omitempty"`
	Hosts     []HostProgress `json:"hosts,omitempty"`
	Child     string         `json:"child,omitempty"` // workflow ID of a child runbook
	Prompt    string         `json:"prompt,omitempty"`
	Decision  *Decision      `json:"decision,omitempty"`
	// Nonce is a waiting approval's: a decision must carry it.
	Nonce string `json:"nonce,omitempty"`
	Undo  string `json:"undo,omitempty"` // state of the undo, when it ran
	// Items is a rollout step's progress per item and Paused whether it
	// waits for an operator at its failure budget. The workflow leaves
	// them empty; clients fill them in from the rollout's own query.
	Items  []StepProgress `json:"items,omitempty"`
	Paused bool           `json:"paused,omitempty"`
	// Waiting is why a running rollout starts no item now (its window is
	// closed, its delay runs, its alerts fire), or why its alert gate
	// paused it: the rollout's Progress.Waiting.
	Waiting string `json:"waiting,omitempty"`
}

// HostProgress is one host of a step that runs on several.
type HostProgress struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"lastError,omitempty"`
}

// Decision is an operator's answer at an approval step.
//
// A decision is bound to the pause it answers: the run (workflow and run
// ID) and the nonce that pause shows in the progress query, whose answers
// only key holders can read. A sealed decision copied from another run or
// an earlier pause is refused by the update's validator.
type Decision struct {
	Step       string    `json:"step"`
	Decision   string    `json:"decision"`
	By         string    `json:"by"`
	Comment    string    `json:"comment,omitempty"`
	At         time.Time `json:"at"`
	WorkflowID string    `json:"workflowId,omitempty"`
	RunID      string    `json:"runId,omitempty"`
	Nonce      string    `json:"nonce,omitempty"`
}
