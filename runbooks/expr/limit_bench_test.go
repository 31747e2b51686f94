package expr

import "testing"

// BenchmarkRenderAtCostLimit times renders that spend close to CostLimit,
// of the shapes that cost most per unit: what one render may take, and so
// what a workflow task that renders TaskCostLimit (and one render more)
// may take against the worker's deadlock detection timeout.
func BenchmarkRenderAtCostLimit(b *testing.B) {
	for _, c := range []struct{ name, src string }{
		{"range", "lists.range(900000).size() == 0"},
		{"map", "lists.range(120000).map(x, x * 2).size() == 0"},
		{"filter", "lists.range(100000).filter(x, x % 2 == 0).size() == 0"},
		{"strings", "lists.range(60000).map(x, string(x) + 'a').size() == 0"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := EvalBool(c.src, map[string]any{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
