package actions

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/actions/spec"
)

// TargetKind says what a step running the action is aimed at.
type TargetKind string

const (
	// TargetNone: the action needs no `on:`.
	TargetNone TargetKind = ""
	// TargetHost: the step's `on:` names the host (or hosts) to run on.
	TargetHost TargetKind = "host"
	// TargetNode: the step's `on:` names the Kubernetes node(s) to act on,
	// through the API server the inventory's `kubernetes:` names.
	TargetNode TargetKind = "node"
	// TargetCluster: the action works on the cluster's API server as a
	// whole (no `on:`); the workflow gives it the inventory's kubernetes
	// section.
	TargetCluster TargetKind = "cluster"
)

// NeedsOn says whether a step running the action must name nodes or hosts
// with `on:`.
func (t TargetKind) NeedsOn() bool { return t == TargetHost || t == TargetNode }

// Input types, as the validator checks literal values.
const (
	TypeString   = "string"
	TypeInt      = "int"
	TypeBool     = "bool"
	TypeList     = "list"
	TypeMap      = "map"
	TypeDuration = "duration"
	TypeMode     = "mode"
	TypeObject   = "object"
)

// Input is one input of an action.
type Input struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Required bool     `json:"required,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	// Shell is set for shell text (host.run's command and script): it is
	// literal text, no expression in it, not even the whole value (the
	// run-command runbook's one param passed through whole aside).
	Shell bool `json:"shell,omitempty"`
	// Env is set for environment variables a command runs with: a map
	// whose keys are literal variable names (host.CheckEnvName), never
	// chosen by an expression.
	Env  bool   `json:"env,omitempty"`
	Elem string `json:"elem,omitempty"` // item type of a list
	Doc  string `json:"doc,omitempty"`
}

// DefaultHeartbeat is an action's heartbeat timeout unless its row names
// one: short, so that the action of a lost worker is retried on another
// within seconds. The worker heartbeats every action while it runs, far
// more often (internal/attempt), whether or not the action has progress
// to report.
const DefaultHeartbeat = 8 * time.Second

// Action describes one action.
type Action struct {
	Name    string     `json:"name"`
	Doc     string     `json:"doc"`
	Target  TargetKind `json:"target,omitempty"`
	Inputs  []Input    `json:"inputs"`
	Outputs []string   `json:"outputs"`
	// OneOf lists groups of inputs of which exactly one must be given.
	OneOf [][]string `json:"oneOf,omitempty"`
	// Timeout is the default start-to-close timeout of one attempt.
	Timeout time.Duration `json:"timeout"`
	// Heartbeat is the heartbeat timeout: a worker that dies mid-attempt is
	// noticed after this long, and Temporal retries the action on another
	// (DefaultHeartbeat unless the action's row names one; the worker
	// heartbeats every running action: internal/attempt).
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// Vault is set for actions that reach the cluster's Vault: the
	// workflow gives them the inventory's vault section.
	Vault bool `json:"vault,omitempty"`
	// Summary is the text/template of the line the Web UI's timeline
	// shows for one call (see Summarize).
	Summary string `json:"summary"`
	// In and Out are the Go types of the input and the result: the
	// implementation the worker registers under Name takes and returns
	// exactly these.
	In  reflect.Type `json:"-"`
	Out reflect.Type `json:"-"`
}

// Input returns the named input.
func (a Action) Input(name string) (Input, bool) {
	for _, in := range a.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return Input{}, false
}

// Lookup finds an action by name.
func Lookup(name string) (Action, bool) {
	i := slices.IndexFunc(table, func(a Action) bool { return a.Name == name })
	if i < 0 {
		return Action{}, false
	}
	return table[i], true
}

// All returns every action, sorted by name.
func All() []Action {
	out := slices.Clone(table)
	slices.SortFunc(out, func(a, b Action) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names returns every action name, sorted.
func Names() []string {
	var names []string
	for _, a := range All() {
		names = append(names, a.Name)
	}
	return names
}

// describe completes a row from its input and result types: their json,
// kedge and doc tags give the inputs, outputs and target.
func describe(r spec.Row) Action {
	a := Action{Name: r.Name, Doc: r.Doc, Timeout: r.Timeout, Heartbeat: cmp.Or(r.Heartbeat, DefaultHeartbeat), Summary: r.Summary,
		In: reflect.TypeOf(r.In), Out: reflect.TypeOf(r.Out)}
	if r.OneOf != nil {
		a.OneOf = [][]string{r.OneOf}
	}
	t := a.In
	_, onCluster := t.FieldByName("Cluster") // then "node" is the target, not an input
	for i := range t.NumField() {
		f := t.Field(i)
		jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch jsonName {
		case "target":
			a.Target = TargetHost
			continue
		case "cluster":
			if a.Target != TargetNode {
				a.Target = TargetCluster
			}
			continue
		case "node":
			if onCluster {
				a.Target = TargetNode
				continue
			}
		case "vault":
			a.Vault = true
			continue
		}
		if jsonName == "" || jsonName == "-" {
			continue
		}
		input := Input{Name: jsonName, Type: goType(f.Type), Doc: f.Tag.Get("doc")}
		if input.Type == TypeList {
			input.Elem = goType(f.Type.Elem())
		}
		for _, opt := range strings.Split(f.Tag.Get("kedge"), ",") {
			switch {
			case opt == "required":
				input.Required = true
			case opt == "duration":
				input.Type = TypeDuration
			case opt == "mode":
				input.Type = TypeMode
			case opt == "shell":
				input.Shell = true
			case opt == "env":
				input.Env = true
			case strings.HasPrefix(opt, "enum="):
				input.Enum = strings.Split(strings.TrimPrefix(opt, "enum="), "|")
			}
		}
		a.Inputs = append(a.Inputs, input)
	}
	rt := a.Out
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			a.Outputs = append(a.Outputs, name)
		}
	}
	return a
}

func goType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return TypeString
	case reflect.Int, reflect.Int32, reflect.Int64:
		return TypeInt
	case reflect.Bool:
		return TypeBool
	case reflect.Slice:
		return TypeList
	case reflect.Map:
		// A map of strings; a map of anything else is an object (the
		// values keep their shape).
		if t.Elem().Kind() == reflect.String {
			return TypeMap
		}
	}
	return TypeObject
}
