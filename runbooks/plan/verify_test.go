package plan

import (
	"strings"
	"testing"
)

func TestVerifyPairsCallsWithThePlan(t *testing.T) {
	ids := RunIDs{Root: "r", Child: func(p, s string) string { return p + "/" + s }, Item: func(c, i string) string { return c + "/node/" + i }}
	check := func(msg string) Call {
		return Call{Step: msg, Action: "kedge.check", Input: map[string]any{"that": true, "message": msg}}
	}
	open := Call{Step: "open", Action: "kedge.check", Input: map[string]any{"that": "${ steps.a.outputs.x }", "message": "${ steps.a.outputs.y }"}, Deferred: []string{"message", "that"}}
	p := &Plan{Cluster: "c", Steps: []Step{
		{ID: "first", Calls: []Call{check("first")}},
		{ID: "maybe", Conditional: true, Calls: []Call{open}},
		{ID: "last", Calls: []Call{{Step: "last", Action: "kedge.check", Input: map[string]any{"that": "${ steps.a.outputs.x }", "message": "${ steps.a.outputs.y }"}, Deferred: []string{"message", "that"}}}},
	}}
	ran := func(msg string) Ran {
		return Ran{Workflow: "r", Action: "kedge.check", TaskQueue: "q", Input: map[string]any{"that": true, "message": msg}}
	}
	// The conditional step did not run: its open call must not take the
	// place of the last step's, which must have run.
	v := Verify(p, []Ran{ran("first"), ran("anything")}, ids, "q", nil)
	if len(v.Problems) != 0 || v.Compared != 2 || v.Deferred != 2 {
		t.Errorf("a run as planned: %+v", v)
	}
	v = Verify(p, []Ran{ran("first"), ran("anything"), {Workflow: "r", Action: "host.run", TaskQueue: "q"}}, ids, "q", nil)
	if len(v.Problems) != 1 || !strings.HasPrefix(v.Problems[0], "ran but not planned: host.run") {
		t.Errorf("an extra call: %+v", v)
	}
	// "second" fits only the open calls: the conditional one takes it.
	v = Verify(p, []Ran{ran("second"), ran("anything")}, ids, "q", nil)
	if len(v.Problems) != 1 || !strings.HasPrefix(v.Problems[0], "planned but not run: step first") {
		t.Errorf("a call with another input: %+v", v)
	}
	v = Verify(p, []Ran{ran("first"), ran("anything")}, ids, "other-queue", nil)
	if len(v.Problems) == 0 {
		t.Errorf("calls on another queue passed: %+v", v)
	}
}
