package workflows

import (
	"strings"
	"testing"
)

// A runbook author's expression that would compute over thirty million
// items (lists.range of a param: validation cannot see its size) fails its
// step once, with the cost error, in each place a step evaluates one: its
// with, its when and its on. The workflow task itself never fails (it
// used to panic, "Potential deadlock detected", and be retried for ever),
// and a sibling step still runs.
func TestCostlyExpressionFailsItsStepOnce(t *testing.T) {
	for _, c := range []struct{ name, step string }{
		{"with", `    action: host.run
    on: worker-1
    with: {command: 'echo "$N"', env: {N: "${ string(lists.range(params.n).map(i, i * 2).size()) }"}}`},
		{"when", `    when: lists.range(params.n).map(i, i * 2).size() > 0
    action: host.run
    on: worker-1
    with: {command: "true"}`},
		{"on", `    action: host.run
    on: "${ lists.range(params.n).map(i, 'worker-1').slice(0, 1) }"
    with: {command: "true"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, f := newEnv(t)
			env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: costly}
params:
  n: {type: int, required: true}
steps:
  - id: sibling
    action: host.run
    on: worker-2
    with: {command: "sibling"}
  - id: costly
`+c.step+`
`, map[string]any{"n": "30000000"}))
			_, err := result(t, env)
			if err == nil || !strings.Contains(err.Error(), "runbook costly failed at step costly") || !strings.Contains(err.Error(), "expression cost limit exceeded") {
				t.Fatalf("want the step failed with the cost error, got %v", err)
			}
			p := progress(t, env)
			if s := stepState(p, "costly"); s.State != StateFailed || s.Attempts > 1 || !strings.Contains(s.LastError, "lists.range(30000000) would make 30000000 items") {
				t.Errorf("costly = %+v", s)
			}
			if calls := f.Calls(); len(calls) != 1 || calls[0] != "run sibling@worker-2" {
				t.Errorf("calls = %v", calls)
			}
		})
	}
}
