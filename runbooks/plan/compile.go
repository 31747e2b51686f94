package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runbooks/inventory"
)

// Plan is what a runbook run will do, decided as far as it can be before
// anything runs.
type Plan struct {
	Runbook string         `json:"runbook"`
	Cluster string         `json:"cluster"`
	Params  map[string]any `json:"params"` // secret ones masked
	Steps   []Step         `json:"steps"`  // by wave, then as written

	params map[string]any // resolved and unmasked: what the run starts with
}

// Step is one step of a plan. Wave 1 steps start at once; a step of wave N
// starts after the steps it needs, the latest of which is in wave N-1.
type Step struct {
	ID      string         `json:"id"`
	Wave    int            `json:"wave"`
	Kind    string         `json:"kind"`
	Action  string         `json:"action,omitempty"`
	Runbook string         `json:"runbook,omitempty"`
	Prompt  string         `json:"prompt,omitempty"`
	Needs   []string       `json:"needs,omitempty"`
	When    string         `json:"when,omitempty"`
	Retry   runbooks.Retry `json:"retry"`
	Timeout time.Duration  `json:"timeout,omitempty"`
	Undo    []string       `json:"undo,omitempty"` // the undo's actions

	// Skipped: its `when:` is false before anything runs. Conditional:
	// its `when:` reads earlier steps' outputs, so whether it runs is
	// decided at run time.
	Skipped     bool `json:"skipped,omitempty"`
	Conditional bool `json:"conditional,omitempty"`
	// Deferred says why hosts, items or params are known only at run
	// time (they read an earlier step's outputs).
	Deferred string `json:"deferred,omitempty"`
	// Error is why the step will fail when it runs; only a step whose
	// `when:` is decided at run time can carry one (any other makes the
	// plan an error).
	Error string `json:"error,omitempty"`

	Hosts []string `json:"hosts,omitempty"` // an action's hosts, a rollout's items
	Calls []Call   `json:"calls,omitempty"` // an action step's, one per host
	Child *Plan    `json:"child,omitempty"` // a runbook step's
	Items []Item   `json:"items,omitempty"` // a rollout's, each with its plan

	MaxUnavailable int `json:"maxUnavailable,omitempty"`
	FailureBudget  int `json:"failureBudget,omitempty"`
	// A rollout's window and the delay between its items.
	Window *window.Spec `json:"window,omitempty"`
	Delay  string       `json:"delay,omitempty"`
	// A rollout's alert gate.
	Alerts *AlertGate `json:"alerts,omitempty"`
}

// Item is one item of a rollout and the plan of its runbook there.
type Item struct {
	Item string `json:"item"`
	Plan *Plan  `json:"plan,omitempty"`
}

// StartParams are the params the run starts with: resolved, unmasked.
func (p *Plan) StartParams() map[string]any { return p.params }

// SecretMask replaces secret values wherever a plan is shown.
const SecretMask = "(secret)"

// Compile resolves the given params of a runbook (unknown names, missing
// required ones and bad values are errors, all reported together) and
// decides every call it can before the run. children are the runbooks
// its steps call, by name.
func Compile(rb *runbooks.Runbook, children map[string]runbooks.Runbook, given map[string]any, cluster *inventory.Cluster) (*Plan, error) {
	params, err := runbooks.ResolveParams(rb, given, cluster)
	if err != nil {
		return nil, &ParamsError{Err: err}
	}
	// The whole plan, children and rollout items included, renders on
	// one run's budget: a plan is bounded as a run is.
	return compile(Scope{Runbook: rb, Children: children, Params: params, Cluster: cluster, Spend: expr.NewSpend()}, nil)
}

// ParamsError is a Compile that failed on the params given: each problem
// (a runbooks.MissingParamError, an unknown name, a bad value) is joined
// in Err.
type ParamsError struct{ Err error }

func (e *ParamsError) Error() string { return e.Err.Error() }
func (e *ParamsError) Unwrap() error { return e.Err }

// compile plans one runbook run; secrets are the values to mask, the
// callers' and this runbook's own.
func compile(sc Scope, secrets []string) (*Plan, error) {
	rb := sc.Runbook
	for _, name := range rb.SecretParams() {
		if s, ok := sc.Params[name].(string); ok && s != "" {
			secrets = append(secrets, s)
		}
	}
	p := &Plan{Runbook: rb.Name, Cluster: sc.Cluster.Name, Params: map[string]any{}, params: sc.Params}
	for k, v := range sc.Params {
		p.Params[k] = v
	}
	for _, name := range rb.SecretParams() {
		if _, ok := p.Params[name]; ok {
			p.Params[name] = SecretMask
		}
	}
	waves := Waves(rb)
	vars := sc.Vars(nil)
	var errs []error
	for i, s := range rb.Steps {
		ps := Step{ID: s.ID, Wave: waves[i], Kind: s.Kind(), Action: s.Action, Runbook: s.Runbook,
			Needs: s.Needs, When: s.When, Retry: s.Retry.WithDefaults(), Timeout: s.Timeout}
		if s.Approval != nil {
			ps.Prompt = s.Approval.Prompt
		}
		for _, u := range s.Undo {
			ps.Undo = append(ps.Undo, u.Action)
		}
		certain := true
		if s.When != "" {
			if conditionReadsSteps(s.When) {
				certain, ps.Conditional = false, true
			} else if ok, err := When(s.When, vars); err != nil {
				errs = append(errs, fmt.Errorf("step %s: when: %w", s.ID, err))
			} else if !ok {
				ps.Skipped = true
			}
		}
		if !ps.Skipped {
			if err := sc.step(&ps, s, vars, secrets); err != nil {
				if certain {
					errs = append(errs, fmt.Errorf("step %s: %w", s.ID, err))
				} else {
					ps.Error = err.Error()
				}
			}
		}
		p.Steps = append(p.Steps, ps)
	}
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return a.Wave - b.Wave })
	return p, errors.Join(errs...)
}

// step fills in what one step will do.
func (sc Scope) step(ps *Step, s runbooks.Step, vars map[string]any, secrets []string) error {
	switch {
	case s.Action != "":
		return sc.actionStep(ps, s, vars, secrets)
	case s.Rollout != nil:
		return sc.rolloutStep(ps, s, vars, secrets)
	case s.Runbook != "":
		if readsSteps(s.With) {
			ps.Deferred = "params come from an earlier step's outputs"
			return nil
		}
		child, err := sc.Child(s, vars)
		if err != nil {
			return err
		}
		ps.Child, err = compile(Scope{Runbook: &child.Runbook, Children: sc.Children, Params: child.Params, Cluster: sc.Cluster, Spend: sc.Spend}, secrets)
		return err
	}
	return nil
}

func (sc Scope) actionStep(ps *Step, s runbooks.Step, vars map[string]any, secrets []string) error {
	action, ok := actions.Lookup(s.Action)
	if !ok {
		return fmt.Errorf("unknown action %s", s.Action)
	}
	hosts := []string{""}
	if action.Target.NeedsOn() {
		if readsSteps(s.On) {
			ps.Deferred = "hosts come from an earlier step's outputs"
			return nil
		}
		var err error
		if hosts, _, err = sc.Hosts(s.On, vars); err != nil {
			return fmt.Errorf("on: %w", err)
		}
		ps.Hosts = hosts
	}
	var errs []error
	for _, h := range hosts {
		c, err := sc.call(s.ID, action, h, s.With, vars, true)
		if err != nil {
			if h != "" {
				err = fmt.Errorf("%s: %w", h, err)
			}
			errs = append(errs, err)
			continue
		}
		c.Input = Mask(c.Input, secrets).(map[string]any)
		ps.Calls = append(ps.Calls, c)
	}
	return errors.Join(errs...)
}

func (sc Scope) rolloutStep(ps *Step, s runbooks.Step, vars map[string]any, secrets []string) error {
	ro := s.Rollout
	// The alert gate is checked even when the items wait for an earlier
	// step: a bad URL stops the run before it starts.
	if a := ro.Alerts; a != nil && !readsSteps([]any{a.URL, a.Names, a.Recheck, a.PauseAfter}) {
		g, err := RolloutAlerts(*a, vars)
		if err != nil {
			return fmt.Errorf("rollout: alerts: %w", err)
		}
		ps.Alerts = g
	}
	if readsSteps(ro.Over) || readsSteps(ro.MaxUnavailable) || readsSteps(ro.FailureBudget) || readsSteps(ro.Delay) || (ro.Window != nil && readsSteps([]any{ro.Window.Schedule, ro.Window.Duration, ro.Window.TimeZone, ro.Window.Blackouts})) {
		ps.Deferred = "items come from an earlier step's outputs"
		return nil
	}
	r, err := sc.Rollout(s, vars)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	ps.Hosts, ps.MaxUnavailable, ps.FailureBudget, ps.Window, ps.Alerts = r.Items, r.MaxUnavailable, r.FailureBudget, r.Window, r.Alerts
	if r.Delay > 0 {
		ps.Delay = r.Delay.String()
	}
	if readsSteps(s.With) {
		ps.Deferred = "params come from an earlier step's outputs"
		return nil
	}
	var errs []error
	failed := 0
	for _, item := range r.Items {
		params, err := ItemParams(&r.Runbook, s.With, vars, item, sc.Cluster)
		var child *Plan
		if err == nil {
			focus := sc.Cluster.Focus(item)
			child, err = compile(Scope{Runbook: &r.Runbook, Children: sc.Children, Params: params, Cluster: &focus, Spend: sc.Spend}, secrets)
		}
		if err != nil {
			// The first few say why; the count says how many.
			if failed++; failed <= maxItemErrors {
				errs = append(errs, fmt.Errorf("item %s: %w", item, err))
			}
			continue
		}
		ps.Items = append(ps.Items, Item{Item: item, Plan: child})
	}
	if failed > maxItemErrors {
		errs = append(errs, fmt.Errorf("and %d more items", failed-maxItemErrors))
	}
	return errors.Join(errs...)
}

// maxItemErrors bounds the items whose errors a rollout's plan spells out.
const maxItemErrors = 3

// conditionReadsSteps: a `when:` is an expression, bare or in ${ }.
func conditionReadsSteps(src string) bool {
	if t, err := expr.ParseTemplate(src); err == nil && !t.HasExpr() {
		src = "${ " + src + " }"
	}
	return readsSteps(src)
}

// Mask replaces every secret value inside v's strings with SecretMask.
func Mask(v any, secrets []string) any {
	if len(secrets) == 0 {
		return v
	}
	switch x := v.(type) {
	case string:
		for _, s := range secrets {
			x = strings.ReplaceAll(x, s, SecretMask)
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Mask(e, secrets)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Mask(e, secrets)
		}
		return out
	}
	return v
}

// Waves numbers each step (by index) with its depth in the DAG: 1 for steps
// that need nothing, else 1 + the deepest step it needs.
func Waves(rb *runbooks.Runbook) []int {
	index := map[string]int{}
	for i, s := range rb.Steps {
		index[s.ID] = i
	}
	waves := make([]int, len(rb.Steps))
	var depth func(i int, seen map[int]bool) int
	depth = func(i int, seen map[int]bool) int {
		if waves[i] > 0 {
			return waves[i]
		}
		if seen[i] {
			return 0
		}
		seen[i] = true
		d := 1
		for _, n := range rb.Steps[i].Needs {
			if j, ok := index[n]; ok {
				d = max(d, depth(j, seen)+1)
			}
		}
		waves[i] = d
		return d
	}
	for i := range rb.Steps {
		depth(i, map[int]bool{})
	}
	return waves
}
