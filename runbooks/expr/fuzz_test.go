package expr

import (
	"errors"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
)

// fuzzVars are the variables a fuzzed expression sees: a little of every
// kind, and a string and a list big enough that a multiplying function
// over them would blow any bound.
var fuzzVars = map[string]any{
	"params": map[string]any{
		"n": 30_000_000, "s": "a,b;c", "big": strings.Repeat("x", 64<<10),
		"list": []any{"a", "b", "a", 1, 2.5, true}, "long": make([]any, 5_000),
		"m": map[string]any{"k": "v", "n": 1, "l": []any{"x"}},
	},
	"steps":   map[string]any{"s": map[string]any{"state": "succeeded", "outputs": map[string]any{"stdout": "ok\n"}}},
	"cluster": map[string]any{"name": "c", "nodes": []any{map[string]any{"name": "n1"}, map[string]any{"name": "n2"}}},
	"host":    map[string]any{"name": "n1"},
	"item":    "n2",
}

// fuzzAllocLimit is what one evaluation may allocate, at most: a render's
// million units of work and its 4 MiB / 100,000-item result leave the
// worker far below its 300 MB.
const fuzzAllocLimit = 256 << 20

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

func heapAllocs() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// FuzzEval: any expression, validated or not (a key holder can start a run
// without the CLI's validation), compiles and evaluates without a panic,
// within the allocation bound, with a result within MaxResultBytes and
// MaxResultItems, and the same result or error twice.
func FuzzEval(f *testing.F) {
	for _, seed := range []string{
		"1 + 2", "params.s.split(',')", "params.list.distinct()", "lists.range(params.n).map(i, i * 2).size()",
		"lists.range(30000000)", "params.big.replace('', params.big)", "lists.range(100000).map(i, params.big).join('')",
		"[0,1,2,3,4,5,6,7,8,9].map(a, [0,1,2,3,4,5,6,7,8,9].map(b, [0,1,2,3,4,5,6,7,8,9].map(c, a + b + c)))",
		"lists.range(1000).map(i, '%.999999f').join('').format(lists.range(1000).map(i, 1.5))",
		"params.long in lists.range(1000).map(i, params.long)", "sets.contains(params.long, params.long)",
		"params.big.matches('(a|b)*c')", "cluster.nodes.filter(n, n.name == item)[0].name", "has(params.m.k) ? params.m.l : []",
		"steps.s.outputs.stdout.trim() == 'ok'", "params.m.map(k, k + '=' + string(params.m[k]))", "lists.range(5000).sort()",
		"[[1, [2]], [3]].flatten(2)", "params.list.sortBy(x, string(x))", "optional.of(params.s).orValue('')", "1 / 0",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return // a runbook's expression, not a file
		}
		_, _ = Check(src) // must not panic either
		before := heapAllocs()
		v1, err1 := Eval(src, fuzzVars)
		if n := heapAllocs() - before; n > fuzzAllocLimit {
			t.Fatalf("%q allocated %d MB", src, n>>20)
		}
		if err1 == nil {
			var items, bytes uint64
			countResult(v1, &items, &bytes)
			if items > MaxResultItems || bytes > MaxResultBytes {
				t.Fatalf("%q handed back %d items, %d bytes", src, items, bytes)
			}
		}
		v2, err2 := Eval(src, fuzzVars)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("%q: not deterministic: %v (%v), then %v (%v)", src, v1, err1, v2, err2)
		}
		if err1 != nil && errors.Is(err1, ErrCostLimit) && !strings.Contains(err1.Error(), ErrCostLimit.Error()) {
			t.Fatalf("%q: cost error without its message: %v", src, err1)
		}
	})
}

func countResult(v any, items, bytes *uint64) {
	switch x := v.(type) {
	case string:
		*bytes += uint64(len(x))
	case []any:
		*items += uint64(len(x))
		for _, e := range x {
			countResult(e, items, bytes)
		}
	case map[string]any:
		*items += uint64(len(x))
		for k, e := range x {
			*bytes += uint64(len(k))
			countResult(e, items, bytes)
		}
	}
}
