package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/prometheus"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runbooks/inventory"
)

// Scope is what one runbook run resolves against: the runbook, the
// runbooks its steps call, its params (resolved by Compile or
// ChildParams) and the cluster.
type Scope struct {
	Runbook  *runbooks.Runbook
	Children map[string]runbooks.Runbook
	Params   map[string]any
	Cluster  *inventory.Cluster
	// Spend is what the run's renders may still spend (expr.Spend); nil:
	// each render is bounded on its own only.
	Spend *expr.Spend
}

// Vars are the variables the run's expressions see, with the finished
// steps' states and outputs (steps may be nil); their renders draw on the
// scope's Spend.
func (sc Scope) Vars(steps map[string]any) map[string]any {
	return expr.WithSpend(Vars(sc.Params, sc.Cluster, steps), sc.Spend)
}

// Call is one action on one host (Host "" for an action on none), ready
// to schedule: its task queue (the site's workers; "" is the runbook's own
// queue) and its input as the worker receives it.
type Call struct {
	Step      string         `json:"step"`
	Action    string         `json:"action"`
	Host      string         `json:"host,omitempty"`
	TaskQueue string         `json:"taskQueue,omitempty"`
	Input     map[string]any `json:"input"`
	// Deferred names the inputs known only at run time (they read an
	// earlier step's outputs): Input holds their expressions.
	Deferred []string `json:"deferred,omitempty"`
}

// When evaluates a step's `when:`.
func When(src string, vars map[string]any) (bool, error) {
	t, err := expr.ParseTemplate(src)
	if err != nil {
		return false, err
	}
	if t.Single() {
		src = t[0].Expr
	}
	return expr.EvalBool(src, vars)
}

// Hosts evaluates a step's `on:` to node names. single reports whether it
// named exactly one host as a plain string (the step's outputs are then
// the action's outputs rather than a map keyed by node).
func (sc Scope) Hosts(on string, vars map[string]any) (hosts []string, single bool, err error) {
	val, err := expr.RenderValue(on, vars)
	if err != nil {
		return nil, false, err
	}
	var sels []string
	switch x := val.(type) {
	case string:
		for _, s := range strings.Split(x, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sels = append(sels, s)
			}
		}
		single = len(sels) == 1 && sels[0] != "all" && sels[0] != "workers" && sels[0] != "controllers"
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false, fmt.Errorf("on: list item %v is not a node name", e)
			}
			sels = append(sels, s)
		}
	default:
		return nil, false, fmt.Errorf("on: gave %v, want a node name or a list of them", val)
	}
	hosts, err = runbooks.SelectNodes(sels, sc.Cluster)
	return hosts, single, err
}

// Call renders one step's action on one host (or on none): its `with`
// against vars (plus `host`), coerced to the action's inputs, with the
// targets the action needs from the inventory.
func (sc Scope) Call(step string, action actions.Action, host string, with, vars map[string]any) (Call, error) {
	return sc.call(step, action, host, with, vars, false)
}

// call renders a call; partial leaves the inputs that read steps'
// outputs as they are written and names them in Deferred.
func (sc Scope) call(step string, action actions.Action, host string, with, vars map[string]any, partial bool) (Call, error) {
	c := Call{Step: step, Action: action.Name, Host: host, TaskQueue: sc.Cluster.TaskQueueFor(host)}
	if host != "" {
		vars = withHost(vars, sc.Cluster, host)
	}
	known := with
	if partial {
		known = map[string]any{}
		for k, v := range with {
			if readsSteps(v) {
				c.Deferred = append(c.Deferred, k)
			} else {
				known[k] = v
			}
		}
		slices.Sort(c.Deferred)
	}
	rendered, err := expr.RenderWith(known, vars)
	if err != nil {
		return c, fmt.Errorf("with: %w", err)
	}
	input, err := actions.CoerceSome(action, rendered, c.Deferred)
	if err != nil {
		return c, err
	}
	for _, k := range c.Deferred {
		input[k] = with[k]
	}
	if err := sc.targets(input, action, host); err != nil {
		return c, err
	}
	c.Input = input
	return c, nil
}

// targets adds to an input where the action reaches: which cluster's
// Vault, which cluster's Kubernetes API, which host over SSH, and the
// Node by its Kubernetes name. A run carries these references only: the
// worker fills in addresses, users, keys, token files and kubeconfigs
// from its own inventory of the cluster (worker/trust), so nothing a
// run says decides what a worker connects to or with what. What the
// action needs is checked here, on the run's inventory, so a run that
// cannot reach its targets is refused before it starts.
func (sc Scope) targets(input map[string]any, action actions.Action, host string) error {
	cl := sc.Cluster
	if action.Vault {
		if cl.Vault.Address == "" {
			return fmt.Errorf("action %s needs the inventory's vault.address", action.Name)
		}
		input["vault"] = target.Vault{Cluster: cl.Name}
	}
	if action.Target == actions.TargetNode || action.Target == actions.TargetCluster {
		if cl.Kubernetes.Kubeconfig == "" {
			return fmt.Errorf("action %s needs the inventory's kubernetes.kubeconfig", action.Name)
		}
		input["cluster"] = target.Kube{Name: cl.Name}
	}
	switch {
	case host == "":
	case action.Target == actions.TargetHost:
		if _, ok := cl.Node(host); !ok {
			return fmt.Errorf("no node %q in cluster %s", host, cl.Name)
		}
		input["target"] = target.SSH{Cluster: cl.Name, Node: host}
	case action.Target == actions.TargetNode:
		// The Node's name in Kubernetes: the inventory's nodeName when
		// it differs from the host's name there.
		input["node"] = cl.KubeName(host)
	}
	return nil
}

// Undo renders one undo action of a step that succeeded on host ("" for
// a step on none): on the undo's own `on:` when it has one, with vars in
// which the step's outputs are visible.
func (sc Scope) Undo(step string, u runbooks.Undo, host string, vars map[string]any) (Call, error) {
	c := Call{Step: step, Action: u.Action}
	action, ok := actions.Lookup(u.Action)
	if !ok {
		return c, fmt.Errorf("unknown action %s", u.Action)
	}
	if !action.Target.NeedsOn() {
		host = ""
	} else if u.On != "" {
		hosts, _, err := sc.Hosts(u.On, vars)
		if err != nil {
			c.Host = host
			return c, fmt.Errorf("undo on: %w", err)
		}
		if len(hosts) == 0 {
			c.Host = host
			return c, fmt.Errorf("undo on: %q names no host", u.On)
		}
		host = hosts[0]
	}
	return sc.Call(step, action, host, u.With, vars)
}

// Child is what a step that calls a runbook runs: the runbook and its
// params, resolved.
type Child struct {
	Runbook runbooks.Runbook
	Params  map[string]any
}

// Child renders the step's `with` against vars and resolves the called
// runbook's params from it.
func (sc Scope) Child(step runbooks.Step, vars map[string]any) (Child, error) {
	rb, ok := sc.Children[step.Runbook]
	if !ok {
		return Child{}, fmt.Errorf("runbook %s was not loaded", step.Runbook)
	}
	with, err := expr.RenderWith(step.With, vars)
	if err != nil {
		return Child{}, fmt.Errorf("with: %w", err)
	}
	params, err := runbooks.ResolveParams(&rb, with, sc.Cluster)
	if err != nil {
		return Child{}, err
	}
	return Child{Runbook: rb, Params: params}, nil
}

// Rollout is a rollout step, resolved: its items, in order, and how many
// run at once and may fail before it pauses.
type Rollout struct {
	Runbook        runbooks.Runbook
	Items          []string
	MaxUnavailable int
	FailureBudget  int
	// Window is when items may start (nil: any time), checked.
	Window *window.Spec
	// Delay is the least time between an item's end and the next start.
	Delay time.Duration
	// Alerts is the alert gate (nil: none), checked.
	Alerts *AlertGate
}

// AlertGate is a rollout's alert gate, resolved: before an item starts,
// the rollout asks the Prometheus server at URL whether an alert of Names
// fires; while one does no item starts and it asks again every Recheck;
// held for PauseAfter, it pauses for a person.
type AlertGate struct {
	URL        string        `json:"url"`
	Names      []string      `json:"names"`
	Recheck    time.Duration `json:"recheck"`
	PauseAfter time.Duration `json:"pauseAfter"`
}

// Rollout evaluates a rollout step's `over`, maxUnavailable and
// failureBudget.
func (sc Scope) Rollout(step runbooks.Step, vars map[string]any) (Rollout, error) {
	rb, ok := sc.Children[step.Runbook]
	if !ok {
		return Rollout{}, fmt.Errorf("runbook %s was not loaded", step.Runbook)
	}
	ro := Rollout{Runbook: rb}
	over, err := expr.RenderValue(step.Rollout.Over, vars)
	if err != nil {
		return ro, err
	}
	switch x := over.(type) {
	case []any:
		for _, e := range x {
			ro.Items = append(ro.Items, expr.Stringify(e))
		}
	case string:
		for _, e := range strings.Split(x, ",") {
			if e = strings.TrimSpace(e); e != "" {
				ro.Items = append(ro.Items, e)
			}
		}
	default:
		return ro, fmt.Errorf("over gave %v, not a list", over)
	}
	if ro.MaxUnavailable, err = rolloutNumber(step.Rollout.MaxUnavailable, 1, vars); err != nil {
		return ro, fmt.Errorf("maxUnavailable must be at least 1 (%w)", err)
	} else if ro.MaxUnavailable < 1 {
		return ro, fmt.Errorf("maxUnavailable must be at least 1, not %d", ro.MaxUnavailable)
	}
	if ro.FailureBudget, err = rolloutNumber(step.Rollout.FailureBudget, 0, vars); err != nil {
		return ro, fmt.Errorf("failureBudget must be at least 0 (%w)", err)
	} else if ro.FailureBudget < 0 {
		return ro, fmt.Errorf("failureBudget must be at least 0, not %d", ro.FailureBudget)
	}
	if ro.Delay, err = rolloutDelay(step.Rollout.Delay, vars); err != nil {
		return ro, err
	}
	if step.Rollout.Window != nil {
		if ro.Window, err = rolloutWindow(*step.Rollout.Window, vars); err != nil {
			return ro, fmt.Errorf("window: %w", err)
		}
	}
	if step.Rollout.Alerts != nil {
		if ro.Alerts, err = RolloutAlerts(*step.Rollout.Alerts, vars); err != nil {
			return ro, fmt.Errorf("alerts: %w", err)
		}
	}
	return ro, nil
}

// RolloutAlerts evaluates a rollout's alert gate; an empty url is no
// gate (nil). The gate is checked here, so that a bad URL or no alert
// names stops the run before it starts.
func RolloutAlerts(a runbooks.RolloutAlerts, vars map[string]any) (*AlertGate, error) {
	str := func(src, field string) (string, error) {
		v, err := expr.RenderValue(src, vars)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return expr.Stringify(v), nil
	}
	url, err := str(a.URL, "url")
	if err != nil || url == "" {
		return nil, err
	}
	if err := prometheus.CheckURL(url); err != nil {
		return nil, err
	}
	g := &AlertGate{URL: url, Names: slices.Clone(a.List), Recheck: runbooks.DefaultAlertsRecheck, PauseAfter: runbooks.DefaultAlertsPauseAfter}
	if a.Names != "" {
		v, err := expr.RenderValue(a.Names, vars)
		if err != nil {
			return nil, fmt.Errorf("names: %w", err)
		}
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				g.Names = append(g.Names, expr.Stringify(e))
			}
		case string:
			for _, e := range strings.Split(x, ",") {
				if e = strings.TrimSpace(e); e != "" {
					g.Names = append(g.Names, e)
				}
			}
		default:
			return nil, fmt.Errorf("names gave %v, not a list of alert names", v)
		}
	}
	if err := prometheus.CheckNames(g.Names); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		src, name string
		dst       *time.Duration
		min       time.Duration
	}{{a.Recheck, "recheck", &g.Recheck, runbooks.MinAlertsRecheck}, {a.PauseAfter, "pauseAfter", &g.PauseAfter, 0}} {
		if f.src == "" {
			continue
		}
		v, err := str(f.src, f.name)
		if err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < f.min {
			return nil, fmt.Errorf("%s %q is not a duration of at least %s (examples: 30s, 5m)", f.name, v, f.min)
		}
		*f.dst = d
	}
	return g, nil
}

// rolloutDelay evaluates a rollout's delay.
func rolloutDelay(src string, vars map[string]any) (time.Duration, error) {
	if src == "" {
		return 0, nil
	}
	r, err := expr.RenderValue(src, vars)
	if err != nil {
		return 0, fmt.Errorf("delay: %w", err)
	}
	v := expr.Stringify(r)
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("delay %q is not a duration (examples: 30s, 5m)", v)
	}
	return d, nil
}

// rolloutWindow evaluates a rollout's window; an empty schedule is no
// window (nil). The window is checked here, so that a bad one stops the
// run before it starts.
func rolloutWindow(w runbooks.RolloutWindow, vars map[string]any) (*window.Spec, error) {
	var out runbooks.RolloutWindow
	for _, f := range []struct {
		src string
		dst *string
	}{{w.Schedule, &out.Schedule}, {w.Duration, &out.Duration}, {w.TimeZone, &out.TimeZone}} {
		v, err := expr.RenderValue(f.src, vars)
		if err != nil {
			return nil, err
		}
		*f.dst = expr.Stringify(v)
	}
	out.List = w.List
	if w.Blackouts != "" {
		v, err := expr.RenderValue(w.Blackouts, vars)
		if err != nil {
			return nil, fmt.Errorf("blackouts: %w", err)
		}
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				out.List = append(out.List, expr.Stringify(e))
			}
		case string:
			out.Blackouts = x
		default:
			return nil, fmt.Errorf("blackouts gave %v, not a list of dates", v)
		}
	}
	if out.Schedule == "" {
		return nil, nil
	}
	spec := out.Literal()
	if _, err := window.Parse(spec); err != nil {
		return nil, err
	}
	return &spec, nil
}

// rolloutNumber evaluates a rollout's maxUnavailable or failureBudget.
func rolloutNumber(src string, def int, vars map[string]any) (int, error) {
	if src == "" {
		return def, nil
	}
	if n, err := strconv.Atoi(src); err == nil {
		return n, nil
	}
	v, err := expr.RenderValue(src, vars)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case int64:
		return int(x), nil
	case string:
		return strconv.Atoi(x)
	}
	return 0, fmt.Errorf("%q gave %v, not a number", src, v)
}

// ItemParams resolves the params of a rollout's runbook for one item: the
// rollout step's `with` against vars (the parent's params, cluster and
// steps) plus `item` and, when the item is a node, `host`.
func ItemParams(rb *runbooks.Runbook, with map[string]any, vars map[string]any, item string, cluster *inventory.Cluster) (map[string]any, error) {
	v := withHost(vars, cluster, item)
	v["item"] = item
	rendered, err := expr.RenderWith(with, v)
	if err != nil {
		return nil, err
	}
	return runbooks.ResolveParams(rb, rendered, cluster)
}

// readsSteps reports whether a value of `with` (or an expression) reads
// an earlier step's outputs, so that it is known only at run time.
func readsSteps(v any) bool {
	switch x := v.(type) {
	case string:
		t, err := expr.ParseTemplate(x)
		if err != nil {
			return false
		}
		for _, seg := range t {
			if seg.IsExpr {
				if refs, err := expr.Check(seg.Expr); err == nil && len(refs.Steps) > 0 {
					return true
				}
			}
		}
	case []any:
		return slices.ContainsFunc(x, readsSteps)
	case map[string]any:
		for _, e := range x {
			if readsSteps(e) {
				return true
			}
		}
	}
	return false
}
