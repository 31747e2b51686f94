package runbooks

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/prometheus"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"
)

var (
	paramNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	stepIDRE    = regexp.MustCompile(`^[a-z][a-zA-Z0-9_-]*$`)
	modeRE      = regexp.MustCompile(`^0?[0-7]{3,4}$`)
	// wholeParamRE is an expression that is one param, read whole.
	wholeParamRE = regexp.MustCompile(`^params\.[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// childLookup finds a child runbook by name; it returns nil when there is
// none.
type childLookup func(name string) (*Runbook, error)

// validate checks a decoded runbook. cluster may be nil (then literal node
// names are not checked).
func validate(rb *Runbook, children childLookup, cluster *inventory.Cluster) source.Errors {
	v := &validator{rb: rb, f: rb.src.file, children: children, cluster: cluster}
	v.params()
	v.steps()
	v.outputs()
	v.paramFilesRun()
	v.runCost()
	return v.errs
}

// runCost refuses a runbook whose expressions may cost more in one run
// than a run may spend (expr.RunCostLimit): each expression's estimate,
// once, or once per host or rollout item (taken as expr.AssumedSize) when
// it is rendered for each. What validation lets through then renders
// within the run's budget; the meter still holds each render and the run
// to their limits.
func (v *validator) runCost() {
	if v.cost > expr.RunCostLimit {
		v.errs.Addf(source.At(v.f, v.rb.src.root), "runbook %s: its expressions may cost up to %d operations in one run (each rendered once, or once per host and per rollout item, taken as %d), more than a run may spend (%d): fewer costly conditions, or smaller lists in them",
			v.rb.Name, v.cost, expr.AssumedSize, expr.RunCostLimit)
	}
}

type validator struct {
	rb       *Runbook
	f        string
	children childLookup
	cluster  *inventory.Cluster
	errs     source.Errors
	index    map[string]int // step id -> index
	cost     uint64         // the most the run's renders may cost (runCost)
}

func (v *validator) at(n *yaml.Node) source.Pos { return source.At(v.f, n) }

// outputs: each a name a parent can read beside the child's state, and
// an expression over any step (all have ended when it renders), once.
func (v *validator) outputs() {
	all := map[string]bool{}
	for _, s := range v.rb.Steps {
		all[s.ID] = true
	}
	for _, name := range slices.Sorted(maps.Keys(v.rb.Outputs)) {
		n := v.rb.src.outputs[name]
		switch {
		case !paramNameRE.MatchString(name):
			v.errs.Addf(v.at(n), "output %q must start with a letter or _ and hold only letters, digits and _", name)
		case name == "state":
			v.errs.Addf(v.at(n), "output %q is taken: a parent reads the child's state as steps.ID.outputs.state", name)
		}
		if v.expression(v.rb.Outputs[name], n, exprScope{anc: all, once: true}, false) {
			v.secretsShown("output "+name, "an output", v.rb.Outputs[name], v.at(n))
		}
	}
}

func (v *validator) params() {
	for _, p := range v.rb.Params {
		ps := v.rb.src.params[p.Name]
		if !paramNameRE.MatchString(p.Name) {
			v.errs.Addf(v.at(ps.key), "param name %q must be letters, digits and _ (it is read as params.%s)", p.Name, p.Name)
		}
		switch {
		case p.Type == "":
			v.errs.Addf(v.at(ps.key), "param %s: type is required (one of %s)", p.Name, strings.Join(ParamTypes, ", "))
		case !slices.Contains(ParamTypes, p.Type):
			v.errs.Addf(v.at(ps.typ), "param %s: unknown type %q (one of %s)", p.Name, p.Type, strings.Join(ParamTypes, ", "))
		case p.Default != nil:
			if p.Required {
				v.errs.Addf(v.at(ps.def), "param %s: a required param takes no default", p.Name)
			}
			if _, err := CoerceParam(p, p.Default, v.cluster); err != nil {
				v.errs.Addf(v.at(ps.def), "param %s: bad default: %v", p.Name, err)
			}
		}
	}
}

func (v *validator) steps() {
	v.index = map[string]int{}
	for i, s := range v.rb.Steps {
		ss := v.rb.src.steps[i]
		switch {
		case s.ID == "":
			v.errs.Addf(source.At(v.f, ss.node), "step: id is required")
		case !stepIDRE.MatchString(s.ID):
			v.errs.Addf(ss.pos(v.f, "id"), "step id %q must start with a lowercase letter and hold only letters, digits, - and _", s.ID)
		}
		if prev, dup := v.index[s.ID]; dup && s.ID != "" {
			v.errs.Addf(ss.pos(v.f, "id"), "duplicate step id %q (first at %s)", s.ID, v.rb.src.steps[prev].pos(v.f, "id"))
			continue
		}
		v.index[s.ID] = i
	}
	for i := range v.rb.Steps {
		v.needs(i)
	}
	v.cycles()
	anc := v.ancestors()
	for i, s := range v.rb.Steps {
		if s.Phase == PhaseRestore {
			// Every other step has ended when a restore step runs.
			for _, o := range v.rb.Steps {
				if o.Phase != PhaseRestore {
					anc[i][o.ID] = true
				}
			}
		}
		v.step(i, anc[i])
	}
	first := -1
	for i, s := range v.rb.Steps {
		if s.Approval == nil || !s.Approval.Preview {
			continue
		}
		if s.Phase == PhaseRestore {
			v.errs.Addf(v.at(v.rb.src.steps[i].preview), "step %s: a restore step cannot be the preview gate", s.ID)
			continue
		}
		if first >= 0 {
			v.errs.Addf(v.at(v.rb.src.steps[i].preview), "step %s: a runbook has one preview gate, and %s is it", s.ID, v.rb.Steps[first].ID)
			continue
		}
		first = i
	}
}

func (v *validator) needs(i int) {
	s, ss := v.rb.Steps[i], v.rb.src.steps[i]
	seen := map[string]bool{}
	for j, need := range s.Needs {
		pos := ss.pos(v.f, "needs")
		if j < len(ss.needs) {
			pos = v.at(ss.needs[j])
		}
		switch {
		case need == s.ID:
			v.errs.Addf(pos, "step %s needs itself", s.ID)
		case seen[need]:
			v.errs.Addf(pos, "step %s lists %q twice in needs", s.ID, need)
		default:
			j, ok := v.index[need]
			switch {
			case !ok:
				v.errs.Addf(pos, "step %s needs %q, which is not a step of this runbook%s", s.ID, need, suggest(need, v.stepIDs()))
			case s.Phase != PhaseRestore && v.rb.Steps[j].Phase == PhaseRestore:
				v.errs.Addf(pos, "step %s needs %s, a restore step: restore steps run only after a restore decision, once the run is undone", s.ID, need)
			case s.Phase == PhaseRestore && v.rb.Steps[j].Phase != PhaseRestore:
				v.errs.Addf(pos, "restore step %s needs %s, which is not a restore step: restore steps run after every other step has ended, and read them without needs", s.ID, need)
			}
		}
		seen[need] = true
	}
}

func (v *validator) stepIDs() []string {
	ids := make([]string, 0, len(v.rb.Steps))
	for _, s := range v.rb.Steps {
		ids = append(ids, s.ID)
	}
	return ids
}

// cycles reports every dependency cycle once, naming its steps in order.
func (v *validator) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(v.rb.Steps))
	var stack []int
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, need := range v.rb.Steps[i].Needs {
			j, ok := v.index[need]
			if !ok || j == i {
				continue
			}
			switch color[j] {
			case white:
				visit(j)
			case grey:
				start := slices.Index(stack, j)
				cyc := make([]string, 0, len(stack)-start+1)
				for _, k := range stack[start:] {
					cyc = append(cyc, v.rb.Steps[k].ID)
				}
				cyc = append(cyc, v.rb.Steps[j].ID)
				slices.Reverse(cyc) // needs point backwards: print in run order
				v.errs.Addf(v.rb.src.steps[j].pos(v.f, "needs"), "dependency cycle: %s", strings.Join(cyc, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range v.rb.Steps {
		if color[i] == white {
			visit(i)
		}
	}
}

// ancestors returns, for every step, the set of steps it (transitively)
// needs. Cycles are tolerated (they are already reported).
func (v *validator) ancestors() []map[string]bool {
	out := make([]map[string]bool, len(v.rb.Steps))
	for i := range v.rb.Steps {
		seen := map[string]bool{}
		queue := slices.Clone(v.rb.Steps[i].Needs)
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			j, ok := v.index[id]
			if !ok || seen[id] {
				continue
			}
			seen[id] = true
			queue = append(queue, v.rb.Steps[j].Needs...)
		}
		out[i] = seen
	}
	return out
}

func (v *validator) step(i int, anc map[string]bool) {
	s, ss := v.rb.Steps[i], v.rb.src.steps[i]
	kinds := 0
	for _, set := range []bool{s.Action != "", s.Runbook != "", s.Approval != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		v.errs.Addf(source.At(v.f, ss.node), "step %s must have exactly one of action, runbook or approval", s.ID)
		return
	}
	scope := exprScope{anc: anc, host: s.On != ""}
	switch {
	case s.Action != "":
		v.action(s.ID, s.Action, s.On, s.With, ss.pos(v.f, "action"), ss.pos(v.f, "on"), ss.withKeys, ss.withVals, ss.pos(v.f, "with"), scope)
	case s.Runbook != "":
		childScope := scope
		childScope.item = s.Rollout != nil
		v.childRunbook(s, ss, childScope)
	case s.Approval != nil:
		if s.With != nil {
			v.errs.Addf(ss.pos(v.f, "with"), "step %s: an approval takes no with", s.ID)
		}
		if s.On != "" {
			v.errs.Addf(ss.pos(v.f, "on"), "step %s: an approval takes no on", s.ID)
		}
		if len(s.Undo) > 0 {
			v.errs.Addf(ss.pos(v.f, "undo"), "step %s: an approval has nothing to undo", s.ID)
		}
		// The prompt may show what earlier steps found: its ${ } are
		// rendered when the gate opens, for everyone who may see the run:
		// never a secret param.
		promptNode := cmpNode(ss.prompt, ss.fields["approval"])
		if v.templates(s.Approval.Prompt, promptNode, scope) {
			v.promptSecrets(s.ID, s.Approval.Prompt, v.at(promptNode))
		}
	}
	if s.When != "" {
		whenScope := scope
		whenScope.once = true // a step's condition renders once, whatever its hosts
		v.expression(s.When, ss.fields["when"], whenScope, true)
	}
	for k, u := range s.Undo {
		us := ss.undos[k]
		undoScope := scope
		undoScope.anc = withKey(anc, s.ID)
		on := cmp.Or(u.On, s.On)
		undoScope.host = on != ""
		at := func(field string, def source.Pos) source.Pos {
			if n, ok := us.fields[field]; ok {
				return v.at(n)
			}
			return def
		}
		actPos := v.at(us.node)
		if u.Action == "" {
			v.errs.Addf(actPos, "step %s: undo.action is required", s.ID)
			continue
		}
		v.action(s.ID+" undo", u.Action, on, u.With, at("action", actPos), at("on", ss.pos(v.f, "on")), us.keys, us.vals, at("with", actPos), undoScope)
	}
	if s.Rollout != nil {
		v.rollout(s, ss, scope)
	}
}

// rollout checks a rollout: it needs a child runbook and a list to go over;
// its numbers are literals in range or expressions.
func (v *validator) rollout(s Step, ss *stepSource, scope exprScope) {
	if s.Runbook == "" {
		v.errs.Addf(ss.pos(v.f, "rollout"), "step %s: a rollout runs a child runbook per item: add runbook:", s.ID)
	}
	if s.Rollout.Over == "" {
		v.errs.Addf(ss.pos(v.f, "rollout"), "step %s: rollout.over is required (the items, e.g. ${ params.nodes })", s.ID)
	} else {
		v.expression(s.Rollout.Over, ss.rollout["over"], scope, false)
	}
	switch s.Rollout.EveryItemFailed {
	case "", EveryItemFailedFail, EveryItemFailedPause:
	default:
		v.errs.Addf(v.at(ss.rollout["everyItemFailed"]), "step %s: rollout.everyItemFailed must be %s or %s, got %q",
			s.ID, EveryItemFailedFail, EveryItemFailedPause, s.Rollout.EveryItemFailed)
	}
	for _, f := range []struct {
		name string
		val  string
		min  int
	}{{"maxUnavailable", s.Rollout.MaxUnavailable, 1}, {"failureBudget", s.Rollout.FailureBudget, 0}} {
		if f.val == "" {
			continue
		}
		if n, err := strconv.Atoi(f.val); err == nil {
			if n < f.min {
				v.errs.Addf(v.at(ss.rollout[f.name]), "step %s: rollout.%s must be at least %d", s.ID, f.name, f.min)
			}
			continue
		}
		if !v.expression(f.val, ss.rollout[f.name], scope, false) {
			v.errs.Addf(v.at(ss.rollout[f.name]), "step %s: rollout.%s %q is neither a number nor an expression", s.ID, f.name, f.val)
		}
	}
	v.rolloutPacing(s, ss, scope)
	v.rolloutAlerts(s, ss, scope)
}

// rolloutAlerts checks a rollout's alert gate: expressions parse, and
// literals are what they must be (a URL prometheus.CheckURL takes, alert
// names, durations); a gate with a url names its alerts.
func (v *validator) rolloutAlerts(s Step, ss *stepSource, scope exprScope) {
	a := s.Rollout.Alerts
	if a == nil {
		return
	}
	literal := func(val, field string) bool {
		if !strings.Contains(val, "${") {
			return true
		}
		v.expression(val, ss.rollout[field], scope, false)
		return false
	}
	if literal(a.URL, "alerts.url") && a.URL != "" {
		if err := prometheus.CheckURL(a.URL); err != nil {
			v.errs.Addf(v.at(ss.rollout["alerts.url"]), "step %s: rollout.alerts.url: %v", s.ID, err)
		}
	}
	switch {
	case a.Names != "":
		if literal(a.Names, "alerts.names") {
			v.errs.Addf(v.at(ss.rollout["alerts.names"]), "step %s: rollout.alerts.names must be a list of alert names or an expression, got %q", s.ID, a.Names)
		}
	case a.List != nil:
		if err := prometheus.CheckNames(a.List); err != nil && (len(a.List) > 0 || a.URL != "") {
			v.errs.Addf(v.at(ss.rollout["alerts.names"]), "step %s: rollout.alerts.names: %v", s.ID, err)
		}
	case a.URL != "":
		v.errs.Addf(v.at(ss.rollout["alerts"]), "step %s: rollout.alerts.names is required: the alerts that hold the rollout while they fire (e.g. [KubeNodeNotReady, etcdMembersDown])", s.ID)
	}
	for _, f := range []struct {
		val, name string
		min       time.Duration
	}{{a.Recheck, "recheck", MinAlertsRecheck}, {a.PauseAfter, "pauseAfter", 0}} {
		if f.val == "" || !literal(f.val, "alerts."+f.name) {
			continue
		}
		if d, err := time.ParseDuration(f.val); err != nil || d < f.min {
			v.errs.Addf(v.at(ss.rollout["alerts."+f.name]), "step %s: rollout.alerts.%s %q is not a duration of at least %s (examples: 30s, 5m)", s.ID, f.name, f.val, f.min)
		}
	}
}

// rolloutPacing checks a rollout's delay and window: expressions parse,
// and literals are what they must be (a duration; a window
// internal/window accepts).
func (v *validator) rolloutPacing(s Step, ss *stepSource, scope exprScope) {
	literal := func(val, field string) bool {
		if !strings.Contains(val, "${") {
			return true
		}
		v.expression(val, ss.rollout[field], scope, false)
		return false
	}
	if d := s.Rollout.Delay; d != "" && literal(d, "delay") {
		if n, err := time.ParseDuration(d); err != nil || n < 0 {
			v.errs.Addf(v.at(ss.rollout["delay"]), "step %s: rollout.delay %q is not a duration (examples: 30s, 5m)", s.ID, d)
		}
	}
	w := s.Rollout.Window
	if w == nil {
		return
	}
	all := true
	for _, f := range []struct{ val, name string }{{w.Schedule, "schedule"}, {w.Duration, "duration"}, {w.TimeZone, "timeZone"}, {w.Blackouts, "blackouts"}} {
		all = literal(f.val, "window."+f.name) && all
	}
	if !all || w.Schedule == "" {
		return
	}
	if _, err := window.Parse(w.Literal()); err != nil {
		v.errs.Addf(v.at(ss.rollout["window"]), "step %s: rollout.window: %v", s.ID, err)
	}
}

func withKey(m map[string]bool, extra string) map[string]bool {
	out := map[string]bool{extra: true}
	for k := range m {
		out[k] = true
	}
	return out
}

type exprScope struct {
	anc  map[string]bool // steps whose outputs are readable
	host bool            // `host` is defined
	item bool            // `item` is defined (inside a rollout's with)
	once bool            // rendered once in a run, even in a step with on:
}

func (v *validator) action(who, name, on string, with map[string]any, actPos, onPos source.Pos, keys, vals map[string]*yaml.Node, withPos source.Pos, scope exprScope) {
	a, ok := actions.Lookup(name)
	if !ok {
		v.errs.Addf(actPos, "step %s: unknown action %q%s (see kedge actions)", who, name, suggest(name, actions.Names()))
		return
	}
	switch {
	case a.Target.NeedsOn() && on == "":
		v.errs.Addf(actPos, "step %s: action %s acts on a node: add on: (a node name, a list, or an expression such as ${ params.nodes })", who, name)
	case !a.Target.NeedsOn() && on != "":
		v.errs.Addf(onPos, "step %s: action %s does not act on a node: remove on:", who, name)
	case on != "":
		v.on(who, on, onPos, scope)
	}
	for _, k := range slices.Sorted(maps.Keys(with)) {
		in, ok := a.Input(k)
		if !ok {
			var names []string
			for _, in := range a.Inputs {
				names = append(names, in.Name)
			}
			v.errs.Addf(v.at(keys[k]), "step %s: action %s has no input %q%s (inputs: %s)", who, name, k, suggest(k, names), strings.Join(names, ", "))
			continue
		}
		v.value(who, in, with[k], vals[k], scope)
		if in.Shell {
			v.shellText(who, name, k, with[k], vals[k])
		}
		if in.Env {
			v.envNames(who, name, k, with[k], vals[k])
		}
	}
	for _, in := range a.Inputs {
		if _, ok := with[in.Name]; in.Required && !ok {
			v.errs.Addf(withPos, "step %s: action %s needs input %q", who, name, in.Name)
		}
	}
	for _, group := range a.OneOf {
		n := 0
		for _, k := range group {
			if _, ok := with[k]; ok {
				n++
			}
		}
		if n != 1 {
			v.errs.Addf(withPos, "step %s: action %s needs exactly one of the inputs %s", who, name, strings.Join(group, ", "))
		}
	}
}

// RunCommand is the runbook whose command param is a root shell by design:
// it alone may pass a value into shell text, and chat grants it by name
// only (chatops.ByNameOnly).
const RunCommand = "run-command"

// isRunCommand reports whether rb is Kedge's own run-command: its name,
// and the params and steps of the file Kedge ships. A runbook of that name
// written anywhere else (a runbook directory is searched before the
// built-ins) is an ordinary runbook, and its shell text is checked like
// any other's.
func isRunCommand(rb *Runbook) bool {
	if rb.Name != RunCommand {
		return false
	}
	shipped := shippedRunCommand()
	return shipped != nil && sameJSON(rb.Params, shipped.Params) && sameJSON(rb.Steps, shipped.Steps)
}

var shippedRunCommand = sync.OnceValue(func() *Runbook {
	data, err := fs.ReadFile(Builtin, RunCommand+".yaml")
	if err != nil {
		return nil
	}
	docs, err := source.Parse("builtin:"+RunCommand+".yaml", data)
	if err != nil || len(docs) != 1 {
		return nil
	}
	rb, errs := decode(docs[0])
	if len(errs) > 0 {
		return nil
	}
	return rb
})

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// shellText refuses an expression in shell text (host.run's command and
// script): a value that holds a quote, a semicolon or $( ) would run as
// shell code, as root. That holds for an expression that is the whole of
// the text too (`${ 'echo ' + params.message }`), and for one reading a
// step's output, the host or the cluster, whose values the hosts and their
// users shape. The value goes in env and the text reads "$NAME". The one
// exception is run-command, whose command is the shell command itself:
// there the whole text may be one of its params, passed through as is
// (`${ params.command }`), and nothing else.
func (v *validator) shellText(who, action, input string, val any, n *yaml.Node) {
	s, ok := val.(string)
	if !ok {
		return
	}
	t, err := expr.ParseTemplate(s)
	if err != nil || (isRunCommand(v.rb) && t.Single() && wholeParamRE.MatchString(t[0].Expr)) {
		return
	}
	for _, part := range t {
		if part.IsExpr {
			v.errs.Addf(v.at(n), "step %s: %s %s interpolates ${ %s } into shell text, where a quote, ; or $( ) in the value would run as shell code: pass it in env (env: {VALUE: ${ %s }}) and write \"$VALUE\"", who, action, input, strings.TrimSpace(part.Expr), strings.TrimSpace(part.Expr))
			return
		}
	}
}

// envNames refuses environment names a value could choose or that run
// code: env is a map written out, its keys literal variable names, and
// none the shell or the loader reads to run code (BASH_ENV, LD_PRELOAD,
// PS4, ...), since its values may come from params, chat and the hosts.
func (v *validator) envNames(who, action, input string, val any, n *yaml.Node) {
	m, ok := val.(map[string]any)
	if !ok {
		v.errs.Addf(v.at(n), "step %s: %s %s must be a map written out (NAME: value), not %s: an expression would choose the variables' names", who, action, input, describe(val))
		return
	}
	keys := map[string]*yaml.Node{}
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			keys[n.Content[i].Value] = n.Content[i]
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		at := keys[k]
		if at == nil {
			at = n
		}
		if strings.Contains(k, "${") {
			v.errs.Addf(v.at(at), "step %s: %s %s name %q is an expression: names are literal, values may be expressions", who, action, input, k)
			continue
		}
		if err := host.CheckEnvName(k); err != nil {
			v.errs.Addf(v.at(at), "step %s: %s %s: %v", who, action, input, err)
		}
	}
}

// codeDirs are where a file is run as code or read as configuration that
// runs code (units, cron, login scripts, sudo's rules, udev's rules).
var codeDirs = []string{"/etc/systemd/", "/lib/systemd/", "/usr/lib/systemd/", "/run/systemd/", "/etc/cron", "/var/spool/cron/",
	"/etc/profile", "/etc/bash", "/etc/sudoers", "/etc/udev/", "/etc/rc.local", "/etc/init.d/", "/root/.", "/etc/ld.so.preload", "/etc/ld.so.conf"}

// paramFilesRun refuses a param written to a file that runs as code: a
// host.write-file whose content reads a param, to a path that a host.run
// of this runbook names in its shell text (`sh /tmp/x.sh` after writing
// ${ params.script } there) or under a directory whose files run as code.
// That is the param in shell text by another road, and whoever shapes the
// value (a chat user, a webhook caller) runs code as root.
func (v *validator) paramFilesRun() {
	type write struct {
		step, path, param string
		at                *yaml.Node
	}
	var writes []write
	var shellTexts []string
	add := func(id, action string, with map[string]any, vals map[string]*yaml.Node) {
		switch action {
		case host.WriteFileAction:
			path, _ := with["path"].(string)
			if path == "" || strings.Contains(path, "${") {
				return
			}
			for _, k := range []string{"content", "contentBase64"} {
				src, ok := with[k].(string)
				if !ok {
					continue
				}
				if p := paramRead(src); p != "" {
					writes = append(writes, write{step: id, path: path, param: p, at: vals[k]})
				}
			}
		case host.RunAction:
			for _, k := range []string{"command", "script"} {
				if text, ok := with[k].(string); ok {
					shellTexts = append(shellTexts, text)
				}
			}
		}
	}
	for i, s := range v.rb.Steps {
		ss := v.rb.src.steps[i]
		add(s.ID, s.Action, s.With, ss.withVals)
		for j, u := range s.Undo {
			var vals map[string]*yaml.Node
			if j < len(ss.undos) {
				vals = ss.undos[j].vals
			}
			add(s.ID, u.Action, u.With, vals)
		}
	}
	for _, w := range writes {
		run := slices.ContainsFunc(shellTexts, func(text string) bool { return strings.Contains(text, w.path) })
		code := slices.ContainsFunc(codeDirs, func(dir string) bool { return strings.HasPrefix(w.path, dir) })
		switch {
		case run:
			v.errs.Addf(v.at(w.at), "step %s: writes params.%s into %s, which a host.run of this runbook runs as shell text: a quote, ; or $( ) in the value would run as shell code; pass the value in env and write \"$VALUE\" in the command", w.step, w.param, w.path)
		case code:
			v.errs.Addf(v.at(w.at), "step %s: writes params.%s into %s, where files run as code: a value there runs as root; write the file from literal text or a rendering action", w.step, w.param, w.path)
		}
	}
}

// paramRead is a param an expression in the template src reads, or "".
func paramRead(src string) string {
	t, err := expr.ParseTemplate(src)
	if err != nil {
		return ""
	}
	for _, seg := range t {
		if !seg.IsExpr {
			continue
		}
		if refs, err := expr.Check(seg.Expr); err == nil && len(refs.Params) > 0 {
			return refs.Params[0]
		}
	}
	return ""
}

// shellParams are the params of rb that become shell text whole (only
// run-command has one: its command). A caller must pass them literal text.
func shellParams(rb *Runbook) map[string]bool {
	out := map[string]bool{}
	for _, s := range rb.Steps {
		withs := []struct {
			action string
			with   map[string]any
		}{{s.Action, s.With}}
		for _, u := range s.Undo {
			withs = append(withs, struct {
				action string
				with   map[string]any
			}{u.Action, u.With})
		}
		for _, w := range withs {
			a, ok := actions.Lookup(w.action)
			if !ok {
				continue
			}
			for _, in := range a.Inputs {
				src, ok := w.with[in.Name].(string)
				if !in.Shell || !ok {
					continue
				}
				t, err := expr.ParseTemplate(src)
				if err != nil || !t.HasExpr() {
					continue
				}
				for _, seg := range t {
					if refs, err := expr.Check(seg.Expr); seg.IsExpr && err == nil {
						for _, p := range refs.Params {
							out[p] = true
						}
					}
				}
			}
		}
	}
	return out
}

// value checks one input value: expressions compile and read only what is in
// scope; literals have the input's type.
func (v *validator) value(who string, in actions.Input, val any, n *yaml.Node, scope exprScope) {
	if v.templates(val, n, scope) {
		return // typed at run time
	}
	var bad string
	switch in.Type {
	case actions.TypeString:
		if _, ok := val.(string); !ok {
			if _, isMap := val.(map[string]any); isMap {
				bad = "a string"
			} else if _, isList := val.([]any); isList {
				bad = "a string"
			}
		}
	case actions.TypeInt:
		if _, ok := val.(int64); !ok {
			bad = "an integer"
		}
	case actions.TypeBool:
		if _, ok := val.(bool); !ok {
			bad = "true or false"
		}
	case actions.TypeList:
		if _, ok := val.([]any); !ok {
			bad = "a list"
		}
	case actions.TypeMap:
		if _, ok := val.(map[string]any); !ok {
			bad = "a mapping"
		}
	case actions.TypeDuration:
		s, ok := val.(string)
		if _, err := time.ParseDuration(s); !ok || err != nil {
			bad = "a duration such as 30s or 5m"
		}
	case actions.TypeMode:
		s, ok := val.(string)
		if !ok || !modeRE.MatchString(s) {
			bad = `a quoted octal mode such as "0644"`
		}
	}
	if bad == "" && len(in.Enum) > 0 {
		if s, _ := val.(string); !slices.Contains(in.Enum, s) {
			bad = "one of " + strings.Join(in.Enum, ", ")
		}
	}
	if bad != "" {
		v.errs.Addf(v.at(n), "step %s: input %s must be %s, got %s", who, in.Name, bad, describe(val))
	}
}

func describe(val any) string {
	switch x := val.(type) {
	case string:
		return strconv.Quote(x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", val)
}

// templates checks every `${ }` inside val; it reports whether val holds
// any expression.
func (v *validator) templates(val any, n *yaml.Node, scope exprScope) bool {
	switch x := val.(type) {
	case string:
		return v.expression(x, n, scope, false)
	case []any:
		any := false
		for i, e := range x {
			var c *yaml.Node
			if n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
				c = n.Content[i]
			}
			any = v.templates(e, cmpNode(c, n), scope) || any
		}
		return any
	case map[string]any:
		any := false
		for _, k := range slices.Sorted(maps.Keys(x)) {
			var c *yaml.Node
			if n != nil && n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						c = n.Content[i+1]
					}
				}
			}
			any = v.templates(x[k], cmpNode(c, n), scope) || any
		}
		return any
	}
	return false
}

func cmpNode(a, b *yaml.Node) *yaml.Node {
	if a != nil {
		return a
	}
	return b
}

// expression checks a template (or, for a condition, a bare CEL expression
// or a single ${ }). It reports whether s holds an expression.
func (v *validator) expression(s string, n *yaml.Node, scope exprScope, condition bool) bool {
	base := v.at(n)
	if n != nil && (n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle) {
		base = base.Shift(1)
	}
	exact := n != nil && n.Kind == yaml.ScalarNode && !strings.Contains(s, "\n") && (n.Style == 0 || n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle)
	posAt := func(off int) source.Pos {
		if exact {
			return base.Shift(off)
		}
		return base
	}
	t, err := expr.ParseTemplate(s)
	if err != nil {
		e := err.(*expr.Error)
		v.errs.Addf(posAt(e.Offset), "bad expression: %s", e.Msg)
		return true
	}
	segs := []expr.Segment(t)
	if condition && !t.HasExpr() {
		segs = []expr.Segment{{Expr: s, IsExpr: true}}
	}
	if condition && t.HasExpr() && !t.Single() {
		v.errs.Addf(posAt(0), "a condition is one expression: write it bare or as a single ${ }")
		return true
	}
	found := false
	for _, seg := range segs {
		if !seg.IsExpr {
			continue
		}
		found = true
		refs, err := expr.Check(seg.Expr)
		if err != nil {
			off := seg.Offset
			if e, ok := err.(*expr.Error); ok {
				off += e.Offset
			}
			v.errs.Addf(posAt(off), "bad expression %q: %v", seg.Expr, err)
			continue
		}
		n := refs.Cost
		if scope.item || scope.host && !scope.once {
			n *= expr.AssumedSize
		}
		v.cost = min(v.cost+n, 1<<62)
		pos := posAt(seg.Offset)
		for _, name := range refs.Vars {
			switch {
			case name == "host" && !scope.host:
				v.errs.Addf(pos, "host is only defined in a step with on:")
			case name == "item" && !scope.item:
				v.errs.Addf(pos, "item is only defined in the with of a rollout step")
			}
		}
		for _, p := range refs.Params {
			if !slices.ContainsFunc(v.rb.Params, func(x Param) bool { return x.Name == p }) {
				var names []string
				for _, x := range v.rb.Params {
					names = append(names, x.Name)
				}
				v.errs.Addf(pos, "unknown param %q%s", p, suggest(p, names))
			}
		}
		for _, id := range refs.Steps {
			if _, ok := v.index[id]; !ok {
				v.errs.Addf(pos, "unknown step %q%s", id, suggest(id, v.stepIDs()))
			} else if !scope.anc[id] {
				v.errs.Addf(pos, "step %q is read here but is not in this step's needs (directly or through other steps), so it may not have run yet", id)
			}
		}
	}
	return found
}

// promptSecrets refuses an approval prompt that shows a secret param.
func (v *validator) promptSecrets(id, prompt string, pos source.Pos) {
	v.secretsShown("step "+id+": approval.prompt", "a prompt", prompt, pos)
}

// secretsShown refuses a text shown to whoever may see the run (what,
// which is a kind) that renders a secret param.
func (v *validator) secretsShown(what, kind, text string, pos source.Pos) {
	t, err := expr.ParseTemplate(text)
	if err != nil {
		return // reported by templates
	}
	secret := v.rb.SecretParams()
	for _, seg := range t {
		if !seg.IsExpr {
			continue
		}
		refs, err := expr.Check(seg.Expr)
		if err != nil {
			continue
		}
		for _, p := range refs.Params {
			if slices.Contains(secret, p) {
				v.errs.Addf(pos, "%s shows the secret param %q: %s is shown to whoever may see the run", what, p, kind)
			}
		}
	}
}

func (v *validator) on(who, on string, pos source.Pos, scope exprScope) {
	t, err := expr.ParseTemplate(on)
	if err != nil || t.HasExpr() {
		n := &yaml.Node{Kind: yaml.ScalarNode, Line: pos.Line, Column: pos.Col}
		scope.once = true // a step's on: renders once
		v.expression(on, n, scope, false)
		return
	}
	if v.cluster == nil {
		return
	}
	for _, name := range strings.Split(on, ",") {
		if _, err := v.cluster.Select(strings.TrimSpace(name)); err != nil {
			v.errs.Addf(pos, "step %s: on: %v", who, err)
		}
	}
}

func (v *validator) childRunbook(s Step, ss *stepSource, scope exprScope) {
	if s.On != "" {
		v.errs.Addf(ss.pos(v.f, "on"), "step %s: a runbook step takes no on (pass nodes as a param)", s.ID)
	}
	child, err := v.children(s.Runbook)
	if err != nil {
		v.errs.Addf(ss.pos(v.f, "runbook"), "step %s: %v", s.ID, err)
		return
	}
	if child == nil {
		v.errs.Addf(ss.pos(v.f, "runbook"), "step %s: unknown runbook %q", s.ID, s.Runbook)
		return
	}
	shell := shellParams(child)
	for _, k := range slices.Sorted(maps.Keys(s.With)) {
		i := slices.IndexFunc(child.Params, func(p Param) bool { return p.Name == k })
		if i < 0 {
			var names []string
			for _, p := range child.Params {
				names = append(names, p.Name)
			}
			v.errs.Addf(v.at(ss.withKeys[k]), "step %s: runbook %s has no param %q%s", s.ID, s.Runbook, k, suggest(k, names))
			continue
		}
		if shell[k] && v.templates(s.With[k], ss.withVals[k], scope) {
			v.errs.Addf(v.at(ss.withVals[k]), "step %s: runbook %s runs its param %s as a root shell: pass it literal text, not %s", s.ID, s.Runbook, k, describe(s.With[k]))
			continue
		}
		if !v.templates(s.With[k], ss.withVals[k], scope) {
			if _, err := CoerceParam(child.Params[i], s.With[k], v.cluster); err != nil {
				v.errs.Addf(v.at(ss.withVals[k]), "step %s: param %s of runbook %s: %v", s.ID, k, s.Runbook, err)
			}
		}
	}
	for _, p := range child.Params {
		if _, ok := s.With[p.Name]; p.Required && !ok {
			v.errs.Addf(ss.pos(v.f, "runbook"), "step %s: runbook %s needs param %q", s.ID, s.Runbook, p.Name)
		}
	}
}

// suggest returns ` (did you mean "x"?)` for the closest candidate.
func suggest(got string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := levenshtein(got, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
