package expr

import (
	"reflect"
	"testing"
)

func TestParseTemplate(t *testing.T) {
	cases := []struct {
		in     string
		single bool
		exprs  []string
		err    bool
	}{
		{in: "plain", exprs: nil},
		{in: "${ params.a }", single: true, exprs: []string{"params.a"}},
		{in: "a=${params.a} b=${ {'k': 1}['k'] }", exprs: []string{"params.a", "{'k': 1}['k']"}},
		{in: "quote ${ '}' + \"}\" }", exprs: []string{"'}' + \"}\""}},
		{in: "escaped $${ not } ${x}", exprs: []string{"x"}},
		{in: "open ${ params.a", err: true},
		{in: "empty ${ }", err: true},
	}
	for _, c := range cases {
		tpl, err := ParseTemplate(c.in)
		if c.err {
			if err == nil {
				t.Errorf("%q: want error", c.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		var exprs []string
		for _, s := range tpl {
			if s.IsExpr {
				exprs = append(exprs, s.Expr)
			}
		}
		if !reflect.DeepEqual(exprs, c.exprs) || tpl.Single() != c.single {
			t.Errorf("%q: exprs %q single %v", c.in, exprs, tpl.Single())
		}
	}
	tpl, _ := ParseTemplate("escaped $${ not } ${x}")
	if got, _ := tpl.Render(map[string]any{}); got != nil && tpl[0].Text != "escaped ${ not } " {
		t.Errorf("escape kept: %q", tpl[0].Text)
	}
}

func TestRenderTypesAndJSONNumbers(t *testing.T) {
	vars := map[string]any{
		// As decoded from JSON: every number is a float64.
		"params": map[string]any{"max": float64(2), "nodes": []any{"a", "b"}, "ratio": 0.5},
		"steps":  map[string]any{"probe": map[string]any{"outputs": map[string]any{"exitCode": float64(0)}}},
	}
	got, err := RenderValue(map[string]any{
		"n":     "${ params.max + 1 }",
		"list":  "${ params.nodes }",
		"text":  "nodes=${ params.nodes } max=${ params.max }",
		"ok":    "${ steps.probe.outputs.exitCode == 0 }",
		"ratio": "${ params.ratio * 2.0 }",
		"plain": 7,
	}, vars)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": int64(3), "list": []any{"a", "b"}, "text": "nodes=a,b max=2", "ok": true, "ratio": 1.0, "plain": 7}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

func TestCheckReportsReferences(t *testing.T) {
	refs, err := Check("params.a + steps['b-c'].outputs.x + size(cluster.workers) > 0 && host.name != ''")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(refs.Params, []string{"a"}) || !reflect.DeepEqual(refs.Steps, []string{"b-c"}) {
		t.Errorf("refs = %+v", refs)
	}
	if _, err := Check("params.a +"); err == nil {
		t.Error("syntax error accepted")
	}
	if _, err := Check("nope.a"); err == nil {
		t.Error("undeclared variable accepted")
	}
}

func TestEvalIsDeterministicAcrossRuns(t *testing.T) {
	vars := map[string]any{"params": map[string]any{"m": map[string]any{"b": 2, "a": 1, "c": 3}}}
	first, err := RenderValue("${ params.m }", vars)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		again, _ := RenderValue("${ params.m } ${ params.m.map(k, k) }", vars)
		if again != "a=1,b=2,c=3 "+Stringify(mustEval(t, "params.m.map(k, k)", vars)) {
			t.Fatalf("unstable rendering: %v", again)
		}
	}
	if !reflect.DeepEqual(first, map[string]any{"a": int64(1), "b": int64(2), "c": int64(3)}) {
		t.Errorf("first = %#v", first)
	}
}

func mustEval(t *testing.T, src string, vars map[string]any) any {
	t.Helper()
	v, err := Eval(src, vars)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
