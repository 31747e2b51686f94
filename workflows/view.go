package workflows

import (
	"fmt"
	"strings"
	"time"
)

// The progress view model: what a front end shows of a run's progress,
// decided once. The terminal's lines and bars, `kedge watch --output json`,
// the chat messages and the Web UI's current details all render a View,
// so a state, a count, an error and a mark read the same in each. It is
// pure and deterministic (the workflow builds one for the Web UI): no
// clock but the one passed in, no map iterated.

// ViewOptions is what a View is built with beside the progress.
type ViewOptions struct {
	// Now is when the view is taken: a running step's elapsed time runs
	// to it. Zero: running steps show no elapsed time.
	Now time.Time
	// Children holds child runbooks' progress by workflow ID (a runbook
	// step's child, a rollout item's), as far as the caller asked for
	// them: their steps become rows under the step or item.
	Children map[string]Progress
	// Runbooks names the runbook a runbook or rollout step runs, by step
	// ID, when the caller knows it (the workflow does); else the step
	// shows its child's workflow ID.
	Runbooks map[string]string
}

// View is a run's progress as the front ends show it.
type View struct {
	WorkflowID string `json:"workflowId"`
	Runbook    string `json:"runbook"`
	Cluster    string `json:"cluster"`
	State      string `json:"state"`
	Mark       string `json:"mark"`
	// Steps counts the run's own steps by state.
	Steps Counts `json:"steps"`
	// Waiting is how many rows wait for a person: approvals waiting and
	// rollouts paused at their failure budget.
	Waiting int    `json:"waiting,omitempty"`
	Error   string `json:"error,omitempty"`
	// Summary is the one line that says where the run is:
	// "running: 4 steps: 1 succeeded, 1 running, 2 pending".
	Summary string `json:"summary"`
	// Rows are the steps in the runbook's order, each followed by its
	// hosts or items and by the steps of its child runbooks that the
	// caller asked for.
	Rows []Row `json:"rows"`
}

// Kinds of row beside the steps' own (action, runbook, rollout, approval).
const (
	RowHost = "host" // one host of a step that runs on several
	RowItem = "item" // one item of a rollout
)

// Row is one line of a View: a step, one of its hosts, a rollout's item,
// or a step of a child runbook.
type Row struct {
	// Depth is 0 for the run's own steps, 1 for their hosts, items and
	// child runbooks' steps, and so on down.
	Depth int `json:"depth"`
	// Path names the row in the whole view: "workers", "workers/worker-2",
	// "workers/worker-2/drain".
	Path string `json:"path"`
	Step string `json:"step"`           // the step, in the runbook it belongs to
	Item string `json:"item,omitempty"` // the host or item ("" on a step's row)
	Kind string `json:"kind"`
	// What says what the row does: "host.run", "runbook ID",
	// "rollout of NAME", `approval "prompt"`.
	What     string `json:"what,omitempty"`
	State    string `json:"state"`
	Mark     string `json:"mark"`
	Attempts int    `json:"attempts,omitempty"`
	// Elapsed is the time from the start to the end, or to Now while it
	// runs, to the second: "1m5s" ("" when unknown).
	Elapsed string `json:"elapsed,omitempty"`
	// Error is the last error, when the state is one it explains (every
	// state but succeeded: a step that succeeded after retries does not
	// show the error of an attempt before).
	Error              string `json:"error,omitempty"`
	WaitingForApproval bool   `json:"waitingForApproval,omitempty"`
	// Paused: a rollout waiting for continue or abort at its failure
	// budget.
	Paused bool `json:"paused,omitempty"`
	// Waiting: a rollout that starts no item now, and why ("waiting for
	// the next window: Sat 02:00 UTC").
	Waiting string `json:"waiting,omitempty"`
	// Prompt is a waiting approval's whole prompt (What clips it): what
	// the operator decides on.
	Prompt  string `json:"prompt,omitempty"`
	Decided string `json:"decided,omitempty"` // "approved by alice"
	Undo    string `json:"undo,omitempty"`    // the state of the step's undo
	Child   string `json:"child,omitempty"`   // the workflow that runs it
	// Parts counts the row's hosts, items, or (for an item whose runbook's
	// progress is known) that runbook's steps, by state.
	Parts Counts `json:"parts,omitempty"`
	// PartsText is Parts as the text front ends show it: "3 hosts: 2
	// succeeded, 1 running", or the host's name when there is one.
	PartsText string `json:"partsText,omitempty"`
	// Total and Done size a bar: the parts, and those that ended (one part
	// for a row with none).
	Total int `json:"total"`
	Done  int `json:"done"`
	// Active are the parts running or waiting (an item's runbook steps).
	Active []string `json:"active,omitempty"`
}

// Count is how many are in one state.
type Count struct {
	State string `json:"state"`
	N     int    `json:"n"`
}

// Counts are per state, in stateOrder, states with none left out.
type Counts []Count

// stateOrder is the order counts are told in: the good news, what moves,
// what went wrong, what did not happen, what is to come.
var stateOrder = []string{
	StateSucceeded, StateUndone, StateRunning, StateUndoing, StateWaiting,
	StateFailed, StateUndoFailed, StateCancelled, StateSkipped, StateNotRun, StatePending,
}

// CountStates counts states in stateOrder; an unknown state comes last,
// in the order first seen.
func CountStates(states []string) Counts {
	var c Counts
	for _, want := range stateOrder {
		if n := countOf(states, want); n > 0 {
			c = append(c, Count{want, n})
		}
	}
	for _, s := range states {
		if c.Of(s) == 0 {
			c = append(c, Count{s, countOf(states, s)})
		}
	}
	return c
}

func countOf(states []string, state string) int {
	n := 0
	for _, s := range states {
		if s == state {
			n++
		}
	}
	return n
}

// Of is how many are in state.
func (c Counts) Of(state string) int {
	for _, x := range c {
		if x.State == state {
			return x.N
		}
	}
	return 0
}

// Total is how many there are.
func (c Counts) Total() int {
	n := 0
	for _, x := range c {
		n += x.N
	}
	return n
}

// Ended is how many are in a state that does not change any more.
func (c Counts) Ended() int {
	n := 0
	for _, x := range c {
		if Ended(x.State) {
			n += x.N
		}
	}
	return n
}

// String is "2 succeeded, 1 running".
func (c Counts) String() string {
	parts := make([]string, len(c))
	for i, x := range c {
		parts[i] = fmt.Sprintf("%d %s", x.N, x.State)
	}
	return strings.Join(parts, ", ")
}

// Ended says whether a state is final: the step, host or item will not
// change any more.
func Ended(state string) bool {
	switch state {
	case StatePending, StateRunning, StateWaiting, StateUndoing:
		return false
	}
	return true
}

// WaitsForApproval says whether the step is an approval waiting for a
// decision.
func (s StepProgress) WaitsForApproval() bool {
	return s.Kind == "approval" && s.State == StateWaiting
}

// maxViewDepth bounds how deep child runbooks are shown.
const maxViewDepth = 4

// NewView builds the view of a run's progress.
func NewView(p Progress, o ViewOptions) View {
	v := View{WorkflowID: p.WorkflowID, Runbook: p.Runbook, Cluster: p.Cluster, State: p.State, Mark: StateMark(p.State), Error: p.Error}
	states := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		states[i] = s.State
	}
	v.Steps = CountStates(states)
	v.Rows = o.steps(nil, p.Steps, 0, "", o.Runbooks)
	for _, r := range v.Rows {
		if r.WaitingForApproval || r.Paused {
			v.Waiting++
		}
	}
	v.Summary = fmt.Sprintf("%s: %s", p.State, plural(len(p.Steps), "step", v.Steps))
	if v.Waiting > 0 {
		v.Summary += fmt.Sprintf("; %d waiting for a decision", v.Waiting)
	}
	return v
}

// plural is "3 hosts: 2 succeeded, 1 running".
func plural(n int, noun string, c Counts) string {
	if n != 1 {
		noun += "s"
	}
	if n == 0 {
		return "no " + noun
	}
	return fmt.Sprintf("%d %s: %s", n, noun, c)
}

// steps appends the rows of a runbook's steps, each followed by its parts.
func (o ViewOptions) steps(rows []Row, steps []StepProgress, depth int, under string, names map[string]string) []Row {
	for _, s := range steps {
		r := o.stepRow(s, depth, under+s.ID, names[s.ID])
		rows = append(rows, r)
		for _, h := range s.Hosts {
			rows = append(rows, hostRow(s, h, depth+1, r.Path))
		}
		for _, it := range s.Items {
			rows = o.item(rows, s, it, depth+1, r.Path)
		}
		if cp, ok := o.Children[s.Child]; ok && s.Kind == "runbook" && depth+1 < maxViewDepth {
			rows = o.steps(rows, cp.Steps, depth+1, r.Path+"/", nil)
		}
	}
	return rows
}

func (o ViewOptions) stepRow(s StepProgress, depth int, path, runbook string) Row {
	r := Row{Depth: depth, Path: path, Step: s.ID, Kind: s.Kind, What: progressWhat(s, runbook), State: s.State, Mark: StateMark(s.State),
		Attempts: s.Attempts, Elapsed: elapsed(s.StartedAt, s.EndedAt, o.Now), Error: shownError(s.State, s.LastError),
		WaitingForApproval: s.WaitsForApproval(), Paused: s.Paused, Waiting: s.Waiting, Undo: s.Undo, Child: s.Child}
	if r.WaitingForApproval {
		r.Prompt = s.Prompt
	}
	if s.Decision != nil {
		r.Decided = fmt.Sprintf("%sd by %s", s.Decision.Decision, s.Decision.By)
	}
	var states []string
	switch {
	case len(s.Items) > 0:
		for _, it := range s.Items {
			states = append(states, it.State)
		}
		r.PartsText = plural(len(states), "item", CountStates(states))
	case len(s.Hosts) > 0:
		for _, h := range s.Hosts {
			states = append(states, h.State)
		}
		r.PartsText = plural(len(states), "host", CountStates(states))
		if len(s.Hosts) == 1 {
			r.PartsText = s.Hosts[0].Name
		}
	}
	r.setParts(states)
	return r
}

// setParts counts the parts and sizes the bar: a row with no parts is one
// part, itself.
func (r *Row) setParts(states []string) {
	if len(states) == 0 {
		r.Total, r.Done = 1, 0
		if Ended(r.State) {
			r.Done = 1
		}
		return
	}
	r.Parts = CountStates(states)
	r.Total, r.Done = len(states), r.Parts.Ended()
}

func hostRow(s StepProgress, h HostProgress, depth int, under string) Row {
	r := Row{Depth: depth, Path: under + "/" + h.Name, Step: s.ID, Item: h.Name, Kind: RowHost, What: s.Action, State: h.State, Mark: StateMark(h.State),
		Attempts: h.Attempts, Error: shownError(h.State, h.LastError)}
	r.setParts(nil)
	return r
}

// item appends a rollout item's row and, when its runbook's progress is
// known, that runbook's steps.
func (o ViewOptions) item(rows []Row, s StepProgress, it StepProgress, depth int, under string) []Row {
	r := Row{Depth: depth, Path: under + "/" + it.ID, Step: s.ID, Item: it.ID, Kind: RowItem, State: it.State, Mark: StateMark(it.State),
		Attempts: it.Attempts, Elapsed: elapsed(it.StartedAt, it.EndedAt, o.Now), Error: shownError(it.State, it.LastError), Child: it.Child}
	if it.Child != "" {
		r.What = "runbook " + it.Child
	}
	cp, known := o.Children[it.Child]
	if !known || it.Child == "" || len(cp.Steps) == 0 {
		r.setParts(nil)
		return append(rows, r)
	}
	states := make([]string, len(cp.Steps))
	for i, cs := range cp.Steps {
		states[i] = cs.State
		if cs.State == StateRunning || cs.State == StateWaiting {
			r.Active = append(r.Active, cs.ID)
		}
	}
	r.setParts(states)
	r.PartsText = plural(len(states), "step", r.Parts)
	rows = append(rows, r)
	if depth+1 < maxViewDepth {
		rows = o.steps(rows, cp.Steps, depth+1, r.Path+"/", nil)
	}
	return rows
}

// progressWhat says what a step does: its action, the runbook it runs, or
// the approval's prompt.
func progressWhat(s StepProgress, runbook string) string {
	switch s.Kind {
	case "runbook":
		if runbook != "" {
			return "runbook " + runbook
		}
		return strings.TrimSpace("runbook " + s.Child)
	case "rollout":
		if runbook != "" {
			return "rollout of " + runbook
		}
		return strings.TrimSpace("rollout " + s.Child)
	case "approval":
		return fmt.Sprintf("approval %q", clip(s.Prompt, 80))
	}
	return s.Action
}

// shownError is the last error when the state is one it explains.
func shownError(state, lastError string) string {
	if state == StateSucceeded {
		return ""
	}
	return lastError
}

func elapsed(start, end *time.Time, now time.Time) string {
	switch {
	case start == nil:
		return ""
	case end != nil:
		return end.Sub(*start).Round(time.Second).String()
	case !now.IsZero() && now.After(*start):
		return now.Sub(*start).Round(time.Second).String()
	}
	return ""
}
