package expr

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// allocated runs f and returns the bytes it allocated (all goroutines;
// the test runs alone in its package's process).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxAlloc bounds what one stopped evaluation may allocate: the worker
// that runs it must stay far under its 300 MB.
const maxAlloc = 128 << 20

// The attacker writes a runbook whose expressions make the workflow do
// unbounded work: lists.range(30000000) in a step made the workflow task
// panic ("Potential deadlock detected"), retried forever, while the worker
// grew to 4.8 GB. Every such expression now stops with a cost error, having
// allocated a bounded amount.
func TestCostlyExpressionsStopWithALimitError(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	list := make([]any, 10_000)
	other := make([]any, 10_000)
	m := map[string]any{}
	for i := range list {
		list[i] = "item"
		other[i] = "item"
		m[strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+strings.Repeat("z", i/26)] = i
	}
	other[len(other)-1] = "different"
	vars := map[string]any{"params": map[string]any{"n": 30_000_000, "big": big, "list": list, "other": other, "m": m,
		"pattern": strings.Repeat("(a|b)", 20_000)}}
	nested := "0"
	for range 7 {
		nested = "[0,1,2,3,4,5,6,7,8,9].map(x, " + nested + ")"
	}
	for name, src := range map[string]string{
		"range":            "lists.range(30000000).map(i, i * 2).size()",
		"range of a param": "lists.range(params.n).map(i, i * 2).size()",
		"seven maps":       nested + ".size()",
		"replace":          "params.big.replace('', params.big).size()",
		"join":             "lists.range(100000).map(i, params.big).join('').size()",
		"flatten":          "lists.range(10000).map(i, params.list).flatten().size()",
		"format":           "lists.range(100000).map(i, '%s').join('').format(lists.range(100000).map(i, params.big)).size()",
		"format precision": "lists.range(1000).map(i, '%.999999f').join('').format(lists.range(1000).map(i, 1.5)).size()",
		"sets":             "sets.contains(lists.range(100000), lists.range(100000).map(i, -1))",
		"distinct":         "lists.range(200000).distinct().size()",
		"matches":          "params.big.matches(params.pattern)",
		"in":               "params.other in lists.range(200000).map(i, params.list)",
		"equality":         "lists.range(100000).map(i, params.list) == lists.range(100000).map(i, params.other)",
		"map reads":        "lists.range(200000).map(i, params.m).size()",
		"concatenation":    "lists.range(100000).map(i, params.big + params.big).size()",
		"sort":             "lists.range(100000).map(i, params.big).sort().size()",
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if n := allocated(func() { _, err = Eval(src, vars) }); n > maxAlloc {
				t.Errorf("allocated %d MB", n>>20)
			}
			if err == nil || !strings.Contains(err.Error(), "cost limit") {
				t.Fatalf("%s: %v", src, err)
			}
		})
	}
}

// What a render hands back is bounded too: a list of 100,000 references
// to one 1 MiB string costs little to build but would be 100 GB of
// activity input.
func TestRenderBoundsItsResult(t *testing.T) {
	vars := map[string]any{"params": map[string]any{"big": strings.Repeat("x", 1<<20)}}
	_, err := RenderValue(map[string]any{"env": map[string]any{"A": "${ lists.range(100000).map(i, params.big) }"}}, vars)
	if err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("huge result: %v", err)
	}
	// Many expressions in one render share one budget.
	with := map[string]any{}
	for i := range 100 {
		with[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "${ lists.range(300000).size() }"
	}
	if _, err := RenderValue(with, vars); err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("100 costly expressions in one with: %v", err)
	}
}

// An expression whose cost is large whatever its inputs is refused when the
// runbook is validated.
func TestCheckRefusesAnExpressionTooCostlyToRun(t *testing.T) {
	nested := "0"
	for range 7 {
		nested = "[0,1,2,3,4,5,6,7,8,9].map(x, " + nested + ")"
	}
	for _, src := range []string{"lists.range(30000000).map(i, i * 2)", nested, "params.nodes.map(a, params.nodes.map(b, params.nodes.map(c, a + b + c)))", "lists.range(1000).map(i, params.nodes.map(a, params.nodes.map(b, a + b)))"} {
		if _, err := Check(src); err == nil || !strings.Contains(err.Error(), "cost") {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// The calls the meter charges before they run still give what CEL gives.
func TestGuardedFunctionsKeepTheirResults(t *testing.T) {
	vars := map[string]any{"params": map[string]any{"nodes": []any{"b", "a", "b"}, "m": map[string]any{"k": "v"}}}
	for src, want := range map[string]any{
		"lists.range(3)":                                 []any{int64(0), int64(1), int64(2)},
		"'a-b-c'.replace('-', '+')":                      "a+b+c",
		"'a-b-c'.replace('-', '+', 1)":                   "a+b-c",
		"params.nodes.join(',')":                         "b,a,b",
		"'a,b'.split(',')":                               []any{"a", "b"},
		"'%s=%d'.format(['n', 3])":                       "n=3",
		"[[1, 2], [3]].flatten()":                        []any{int64(1), int64(2), int64(3)},
		"params.nodes.distinct()":                        []any{"b", "a"},
		"params.nodes.sort()":                            []any{"a", "b", "b"},
		"sets.contains(params.nodes, ['a'])":             true,
		"sets.intersects(params.nodes, ['c'])":           false,
		"sets.equivalent(params.nodes, ['a', 'b'])":      true,
		"'kubelet-v1'.matches('^kubelet-v[0-9]+$')":      true,
		"matches('x', 'y')":                              false,
		"'a' in params.nodes && 'k' in params.m":         true,
		"params.nodes == ['b', 'a', 'b']":                true,
		"params.m != {'k': 'v'}":                         false,
		"params.nodes.sortBy(n, n).map(n, n + '!')":      []any{"a!", "b!", "b!"},
		"[1, 2] == dyn([1, 2.0]) && dyn(1) in dyn([1u])": true,
		"size(params.nodes.map(n, params.m)) == 3":       true,
		"params.nodes.filter(n, n == 'b').size() == 2":   true,
		"lists.range(1000).map(a, lists.range(100).exists(b, a == b)).filter(x, x).size()": int64(100),
	} {
		got, err := Eval(src, vars)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v (%v), want %#v", src, got, err, want)
		}
	}
	// Errors in arguments stay errors.
	if _, err := Eval("lists.range(1 / 0)", vars); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("division by zero: %v", err)
	}
}

// The cost error is ErrCostLimit, and the same on every run: a replay of
// the workflow that evaluated it fails where the run did, with the same
// message.
func TestCostErrorIsStable(t *testing.T) {
	vars := map[string]any{"params": map[string]any{"n": 5000}}
	src := "lists.range(params.n).map(a, lists.range(params.n).size()).size()"
	_, first := Eval(src, vars)
	if !errors.Is(first, ErrCostLimit) {
		t.Fatalf("want ErrCostLimit, got %v", first)
	}
	for range 5 {
		if _, err := Eval(src, vars); err == nil || err.Error() != first.Error() {
			t.Fatalf("unstable: %v, then %v", first, err)
		}
	}
}
