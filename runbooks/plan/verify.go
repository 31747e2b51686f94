package plan

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Ran is one action a run scheduled, as its history (or a recording fake)
// has it: the run that scheduled it, its task queue and its input.
type Ran struct {
	Workflow  string
	Action    string
	TaskQueue string
	Input     map[string]any
}

// RunIDs names the runs of a plan: the top-level run, the run a step
// that calls a runbook starts, and the run of one rollout item.
type RunIDs struct {
	Root  string
	Child func(parent, step string) string
	Item  func(cluster, item string) string
}

// Verdict is how a run compares with its plan.
type Verdict struct {
	Problems []string // calls that ran but were not planned, or the reverse
	Compared int      // calls paired with a planned call
	Deferred int      // inputs of those the plan left to run time
}

// planned is one call of a plan with the run that makes it.
type planned struct {
	Call
	workflow    string
	conditional bool // its step's when: is decided at run time
}

// Verify pairs every call that ran with a call of p: the same run, action
// and task queue (own stands for ""), and every input the plan spells out
// equal (the values of secret params masked, as the plan shows them).
// A call that ran may also belong to a step whose hosts, or to a run
// whose params, the plan leaves to run time. Every planned call of a step
// that was sure to run must have run.
func Verify(p *Plan, ran []Ran, ids RunIDs, own string, secrets []string) Verdict {
	var calls []planned
	open := map[string]bool{}
	flatten(p, ids.Root, false, ids, &calls, open)
	openRun := func(wf string) bool {
		for k := range open {
			if prefix, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(wf, prefix) {
				return true
			}
		}
		return false
	}
	fits := func(c planned, r Ran) bool {
		return c.workflow == r.Workflow && c.Action == r.Action && cmpOr(c.TaskQueue, own) == r.TaskQueue &&
			sameInput(c.Call, Mask(r.Input, secrets).(map[string]any))
	}
	pairOf := match(calls, ran, fits)
	var v Verdict
	done := make([]bool, len(calls))
	for i, j := range pairOf {
		if j >= 0 {
			done[j] = true
			v.Compared++
			v.Deferred += len(calls[j].Deferred)
			continue
		}
		r := ran[i]
		if !open[r.Workflow+" "+r.Action] && !openRun(r.Workflow) {
			v.Problems = append(v.Problems, fmt.Sprintf("ran but not planned: %s in %s on queue %s, input %s", r.Action, r.Workflow, r.TaskQueue, jsonText(r.Input)))
		}
	}
	for j, c := range calls {
		if !done[j] && !c.conditional {
			v.Problems = append(v.Problems, fmt.Sprintf("planned but not run: step %s %s in %s, input %s", c.Step, c.Action, c.workflow, jsonText(c.Input)))
		}
	}
	return v
}

// match pairs calls that ran with planned calls they fit: a maximum
// matching that takes planned calls in order, those sure to run first,
// then those that spell out more, so a call the plan leaves open never
// takes the place of one it spells out. It returns, per call that ran,
// the planned call's index or -1.
func match(calls []planned, ran []Ran, fits func(planned, Ran) bool) []int {
	rank := func(c planned) int {
		if c.conditional {
			return 1000 + len(c.Deferred)
		}
		return len(c.Deferred)
	}
	order := make([]int, len(calls))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int { return rank(calls[a]) - rank(calls[b]) })
	cands := make([][]int, len(calls))
	for j, c := range calls {
		for i, r := range ran {
			if fits(c, r) {
				cands[j] = append(cands[j], i)
			}
		}
	}
	pairOf := make([]int, len(ran))
	for i := range pairOf {
		pairOf[i] = -1
	}
	var augment func(j int, seen []bool) bool
	augment = func(j int, seen []bool) bool {
		for _, i := range cands[j] {
			if seen[i] {
				continue
			}
			seen[i] = true
			if pairOf[i] < 0 || augment(pairOf[i], seen) {
				pairOf[i] = j
				return true
			}
		}
		return false
	}
	for _, j := range order {
		augment(j, make([]bool, len(ran)))
	}
	return pairOf
}

// flatten lists a plan's calls by the run that makes them, and what the
// plan leaves open: "RUN ACTION" for a step whose hosts come from earlier
// steps, "PREFIX*" for runs whose params or items do.
func flatten(p *Plan, wf string, conditional bool, ids RunIDs, calls *[]planned, open map[string]bool) {
	for _, s := range p.Steps {
		if s.Skipped {
			continue
		}
		cond := conditional || s.Conditional
		switch {
		case s.Deferred != "" && s.Kind == "rollout" && len(s.Items) == 0:
			open[ids.Item(p.Cluster, "")+"*"] = true
		case s.Deferred != "" && s.Kind == "runbook":
			open[ids.Child(wf, s.ID)+"*"] = true
		case s.Deferred != "":
			open[wf+" "+s.Action] = true
		}
		for _, c := range s.Calls {
			*calls = append(*calls, planned{Call: c, workflow: wf, conditional: cond})
		}
		if s.Child != nil {
			flatten(s.Child, ids.Child(wf, s.ID), cond, ids, calls, open)
		}
		for _, it := range s.Items {
			flatten(it.Plan, ids.Item(p.Cluster, it.Item), cond, ids, calls, open)
		}
	}
}

func cmpOr(q, own string) string {
	if q == "" {
		return own
	}
	return q
}

// sameInput: the inputs are the same names, and every one the plan spells
// out has the value that ran. Both sides are compared as JSON has them.
func sameInput(c Call, in map[string]any) bool {
	if len(c.Input) != len(in) {
		return false
	}
	for k, v := range c.Input {
		got, ok := in[k]
		if !ok {
			return false
		}
		if slices.Contains(c.Deferred, k) {
			continue
		}
		if !reflect.DeepEqual(asJSON(v), asJSON(got)) {
			return false
		}
	}
	return true
}

func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
