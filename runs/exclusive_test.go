package runs

import (
	"testing"
	"time"
)

// Two runs that started together (the same millisecond, as visibility
// keeps it, or a moment apart): exactly one of them is before the other,
// so exactly one is refused, whichever asks first.
func TestBeforeOrdersEveryPair(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, ids := range [][2]string{{"run-a", "run-b"}, {"run-b", "run-a"}} {
		for _, delta := range []time.Duration{-time.Millisecond, 0, 300 * time.Microsecond, time.Millisecond, time.Minute} {
			a, b := t0, t0.Add(delta)
			if before(a, ids[0], b, ids[1]) == before(b, ids[1], a, ids[0]) {
				t.Errorf("%s at %s and %s at %s: both or neither go first", ids[0], a, ids[1], b)
			}
		}
	}
}
