package expr

import (
	"errors"
	"testing"
)

// A run's renders draw on one budget: each render on its own stays under
// CostLimit, but once the run has spent its budget the next render is
// refused, naming the run's limit. Renders without a run's spend are held
// to their own limit only.
func TestRendersDrawOnTheRunsSpend(t *testing.T) {
	const costly = "${ lists.range(900000).size() == 0 }"
	s := &Spend{Left: 1_500_000}
	vars := WithSpend(map[string]any{}, s)
	if _, err := RenderValue(costly, vars); err != nil {
		t.Fatalf("the first render: %v", err)
	}
	if s.Left >= 1_500_000-900_000 || s.SinceYield < 900_000 {
		t.Errorf("after one render the run has %d left and spent %d this task", s.Left, s.SinceYield)
	}
	_, err := RenderValue(costly, vars)
	if !errors.Is(err, ErrRunCostLimit) || !errors.Is(err, ErrCostLimit) {
		t.Fatalf("the render past the run's budget: %v", err)
	}
	if _, err := RenderValue(costly, map[string]any{}); err != nil {
		t.Errorf("a render with no run's spend: %v", err)
	}
	// A new workflow task starts the task's count again; the run's stays.
	left := s.Left
	s.Task(1)
	s.Task(2)
	if s.SinceYield != 0 || s.Left != left || s.MustYield() {
		t.Errorf("after a new task: %+v", s)
	}
	s.SinceYield = TaskCostLimit
	if !s.MustYield() {
		t.Error("a task that rendered TaskCostLimit does not yield")
	}
}
