package runbooks

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks/source"
)

// APIVersion and Kind identify a runbook document.
const (
	APIVersion = "kedge/v1"
	Kind       = "Runbook"
)

// Parameter types.
const (
	ParamString   = "string"
	ParamInt      = "int"
	ParamBool     = "bool"
	ParamDuration = "duration"
	ParamList     = "list"
	ParamImage    = "image"
	ParamNodes    = "nodes"
)

// ParamTypes lists the valid parameter types.
var ParamTypes = []string{ParamString, ParamInt, ParamBool, ParamDuration, ParamList, ParamImage, ParamNodes}

// Runbook is a loaded, validated runbook. It is plain data: the workflow
// receives it as input.
type Runbook struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Internal runbooks are called by other runbooks only (they take
	// what their parent prepared, a CA key say): chat and webhooks never
	// start them.
	Internal bool    `json:"internal,omitempty"`
	File     string  `json:"file,omitempty"`
	Params   []Param `json:"params,omitempty"`
	Steps    []Step  `json:"steps"`
	// Outputs are what a run reports when it ends, each an expression over
	// its steps' outputs, rendered whether it succeeded or not (one that
	// reads a step that did not run is reported unavailable): a parent
	// reads them as steps.ID.outputs.NAME.
	Outputs map[string]string `json:"outputs,omitempty"`

	src *runbookSource // YAML nodes for positioned errors; nil for runbooks decoded from JSON
}

// Param declares one parameter.
type Param struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required,omitempty"`
	Default     any    `json:"default,omitempty"`
	Description string `json:"description,omitempty"`
	Secret      bool   `json:"secret,omitempty"`
}

// Step is one node of the DAG. Exactly one of Action, Runbook and Approval
// is set.
type Step struct {
	ID       string         `json:"id"`
	Name     string         `json:"name,omitempty"`
	Needs    []string       `json:"needs,omitempty"`
	Action   string         `json:"action,omitempty"`
	Runbook  string         `json:"runbook,omitempty"`
	Approval *Approval      `json:"approval,omitempty"`
	On       string         `json:"on,omitempty"`
	With     map[string]any `json:"with,omitempty"`
	When     string         `json:"when,omitempty"`
	Retry    *Retry         `json:"retry,omitempty"`
	Timeout  time.Duration  `json:"timeout,omitempty"`
	Undo     UndoList       `json:"undo,omitempty"`
	Rollout  *Rollout       `json:"rollout,omitempty"`
	// Phase "restore" marks a step that runs only when a person answers
	// a pause of this run's rollouts with restore: after the run has
	// undone what it did. Such steps need only each other and may read
	// every other step.
	Phase string `json:"phase,omitempty"`
}

// PhaseRestore is Step.Phase of the steps a restore decision runs.
const PhaseRestore = "restore"

// HasRestore says whether the runbook has steps a restore decision runs:
// only then do its rollouts offer restore at a pause.
func (rb *Runbook) HasRestore() bool {
	for _, s := range rb.Steps {
		if s.Phase == PhaseRestore {
			return true
		}
	}
	return false
}

// Rollout runs the step's child runbook once per item of Over, at most
// MaxUnavailable at a time (a sliding window), pausing for an operator when
// more than FailureBudget items fail. Each field may be an expression.
type Rollout struct {
	Over           string `json:"over"`
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	FailureBudget  string `json:"failureBudget,omitempty"`
	// EveryItemFailed is what a rollout in which no item completed does:
	// "fail" (the default: nothing to accept or undo) or "pause" for a
	// decision like any rollout past its budget (a rollout of one
	// item whose failure a person should look at before the run undoes).
	EveryItemFailed string `json:"everyItemFailed,omitempty"`
	// Window, when its schedule is not empty, is when items may start:
	// a rollout starts an item only while the window is open, lets the
	// running ones finish when it closes and waits for the next opening.
	Window *RolloutWindow `json:"window,omitempty"`
	// Delay is the least time between an item's end and the next item's
	// start (a duration or an expression).
	Delay string `json:"delay,omitempty"`
	// Alerts, when its url is not empty, holds the rollout while an
	// alert of a named set fires in Prometheus: no item starts, the
	// running ones finish, and it asks again every recheck; still firing
	// after pauseAfter, the rollout pauses for a person.
	Alerts *RolloutAlerts `json:"alerts,omitempty"`
}

// RolloutAlerts is a rollout's alert gate, each field a literal or an
// expression: an empty url means none. Names is an expression giving a
// list of alert names, or the literal list itself (List).
type RolloutAlerts struct {
	URL        string   `json:"url,omitempty"`
	Names      string   `json:"names,omitempty"`
	List       []string `json:"nameList,omitempty"` // a literal list given in YAML
	Recheck    string   `json:"recheck,omitempty"`
	PauseAfter string   `json:"pauseAfter,omitempty"`
}

// Defaults of a rollout's alert gate.
const (
	// DefaultAlertsRecheck is how often a held rollout asks again.
	DefaultAlertsRecheck = 30 * time.Second
	// DefaultAlertsPauseAfter is how long alerts may hold a rollout
	// before it pauses for a person.
	DefaultAlertsPauseAfter = 30 * time.Minute
	// MinAlertsRecheck bounds how often a held rollout asks (each
	// question is a few events in its history).
	MinAlertsRecheck = time.Second
)

// RolloutWindow is a rollout's maintenance window (internal/window's
// Spec), each field a literal or an expression: an empty schedule means
// none. Blackouts is an expression giving a list of dates or date
// ranges, or the literal list itself.
type RolloutWindow struct {
	Schedule  string   `json:"schedule,omitempty"`
	Duration  string   `json:"duration,omitempty"`
	TimeZone  string   `json:"timeZone,omitempty"`
	Blackouts string   `json:"blackouts,omitempty"`
	List      []string `json:"blackoutList,omitempty"` // a literal list given in YAML
}

// Literal is the window as written, every field taken literally:
// Blackouts, when not a YAML list, is a comma-separated one.
func (w RolloutWindow) Literal() window.Spec {
	spec := window.Spec{Schedule: w.Schedule, Duration: w.Duration, TimeZone: w.TimeZone, Blackouts: w.List}
	for _, b := range strings.Split(w.Blackouts, ",") {
		if b = strings.TrimSpace(b); b != "" {
			spec.Blackouts = append(spec.Blackouts, b)
		}
	}
	return spec
}

// Values of Rollout.EveryItemFailed.
const (
	EveryItemFailedFail  = "fail"
	EveryItemFailedPause = "pause"
)

// Kind says what the step does: "action", "runbook", "rollout" or
// "approval".
func (s *Step) Kind() string {
	switch {
	case s.Rollout != nil:
		return "rollout"
	case s.Runbook != "":
		return "runbook"
	case s.Approval != nil:
		return "approval"
	}
	return "action"
}

// Approval pauses the runbook until an operator decides.
type Approval struct {
	Prompt string `json:"prompt"`
	// Preview marks the gate a preview runs up to (`kedge plan --live`):
	// every step it needs, directly or not, only reads, and its prompt
	// says what the run would change. A runbook has at most one.
	Preview bool `json:"preview,omitempty"`
}

// OutputNames are the names of the runbook's outputs, sorted.
func (rb *Runbook) OutputNames() []string {
	return slices.Sorted(maps.Keys(rb.Outputs))
}

// PreviewGate is the index of the runbook's preview gate, -1 when it has
// none.
func (rb *Runbook) PreviewGate() int {
	for i, s := range rb.Steps {
		if s.Approval != nil && s.Approval.Preview {
			return i
		}
	}
	return -1
}

// Retry is a step's retry policy. Zero values take the defaults.
type Retry struct {
	MaxAttempts     int           `json:"maxAttempts,omitempty"`
	InitialInterval time.Duration `json:"initialInterval,omitempty"`
	Backoff         float64       `json:"backoff,omitempty"`
	MaxInterval     time.Duration `json:"maxInterval,omitempty"`
}

// Retry defaults.
const (
	DefaultMaxAttempts     = 3
	DefaultInitialInterval = time.Second
	DefaultBackoff         = 2.0
	DefaultMaxInterval     = time.Minute
)

// WithDefaults fills unset fields.
func (r *Retry) WithDefaults() Retry {
	out := Retry{}
	if r != nil {
		out = *r
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.InitialInterval == 0 {
		out.InitialInterval = DefaultInitialInterval
	}
	if out.Backoff == 0 {
		out.Backoff = DefaultBackoff
	}
	if out.MaxInterval == 0 {
		out.MaxInterval = DefaultMaxInterval
	}
	return out
}

// Delay returns the wait before attempt n+1 after attempt n (1-based) failed.
func (r Retry) Delay(n int) time.Duration {
	d := float64(r.InitialInterval)
	for i := 1; i < n; i++ {
		d *= r.Backoff
		if d >= float64(r.MaxInterval) {
			return r.MaxInterval
		}
	}
	return min(time.Duration(d), r.MaxInterval)
}

// Undo is one action of a step's compensation. When the runbook fails, the
// compensation of every completed step runs, newest step first; a step's
// own undo actions run in the order written. Its `with` may read the step's
// own outputs (steps.ID.outputs). On defaults to the step's On.
type Undo struct {
	Action string         `json:"action"`
	On     string         `json:"on,omitempty"`
	With   map[string]any `json:"with,omitempty"`
}

// UndoList is a step's compensation: one action or several.
type UndoList []Undo

// UnmarshalJSON accepts a single undo object (how runbooks before undo
// lists were recorded) or a list.
func (u *UndoList) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var one Undo
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*u = UndoList{one}
		return nil
	}
	var list []Undo
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*u = list
	return nil
}

// runbookSource remembers where things were written.
type runbookSource struct {
	file    string
	root    *yaml.Node
	params  map[string]*paramSource
	steps   []*stepSource
	outputs map[string]*yaml.Node // each output's expression
}

type paramSource struct {
	key, typ, def *yaml.Node
}

type stepSource struct {
	node     *yaml.Node
	fields   map[string]*yaml.Node // field name -> value node
	needs    []*yaml.Node
	withKeys map[string]*yaml.Node
	withVals map[string]*yaml.Node
	undos    []undoSource
	rollout  map[string]*yaml.Node
	prompt   *yaml.Node // approval.prompt's value
	preview  *yaml.Node // approval.preview's value
}

type undoSource struct {
	node       *yaml.Node
	fields     map[string]*yaml.Node
	keys, vals map[string]*yaml.Node
}

func (s *stepSource) pos(file, field string) source.Pos {
	if n, ok := s.fields[field]; ok {
		return source.At(file, n)
	}
	return source.At(file, s.node)
}
