package expr

import (
	"errors"
	"fmt"
)

// Spend is what one run's renders may spend in all, beside each render's
// own CostLimit: a runbook with a hundred costly conditions, or a rollout
// whose with holds one for each of its items, would otherwise spend a
// hundred renders' worth in one workflow task. A workflow keeps one Spend
// for its life and passes it in the vars of each render (WithSpend); a
// render draws its budget from what is left, and what it spent is taken
// from the run's. SinceYield is what was spent in the current workflow
// task (Task): past TaskCostLimit the workflow yields, so no workflow
// task renders for longer than about two renders' time.
// Deterministic, as the meter is: a replay spends what the run did.
type Spend struct {
	Left       uint64
	SinceYield uint64
	task       int64 // the task SinceYield counts in (Task)
}

const (
	// RunCostLimit bounds what one run's renders spend in all: fifty
	// renders at their limit, about ten seconds of CPU on a 2-core machine
	// (BenchmarkRenderAtCostLimit: 0.15-0.21 s a render). The runbooks
	// Kedge ships spend a few thousand units in a run.
	RunCostLimit = 50 * CostLimit
	// TaskCostLimit is what a workflow renders before it yields: a task
	// renders at most this and one render more, under half a second on an
	// idle 2-core machine, well inside the worker's deadlock detection
	// timeout (workflows.DeadlockDetectionTimeout) on a busy one.
	TaskCostLimit = CostLimit
)

// NewSpend is a run's spend with RunCostLimit left.
func NewSpend() *Spend { return &Spend{Left: RunCostLimit} }

// MustYield reports whether the workflow should end its task before it
// renders more.
func (s *Spend) MustYield() bool { return s != nil && s.SinceYield >= TaskCostLimit }

// Task tells the spend which workflow task renders now (any number that
// differs from one task to the next: the history's length when it
// began); a new task starts SinceYield again.
func (s *Spend) Task(id int64) {
	if s != nil && s.task != id {
		s.task, s.SinceYield = id, 0
	}
}

// spendKey is where vars carry the run's Spend: a name no expression can
// read (every variable an expression reads is one of Variables).
const spendKey = "\x00spend"

// WithSpend returns vars carrying s: the renders over them draw on it.
func WithSpend(vars map[string]any, s *Spend) map[string]any {
	if s == nil {
		return vars
	}
	if vars == nil {
		vars = map[string]any{}
	}
	vars[spendKey] = s
	return vars
}

// SpendOf is the Spend vars carry, or nil.
func SpendOf(vars map[string]any) *Spend {
	s, _ := vars[spendKey].(*Spend)
	return s
}

// ErrRunCostLimit is a render refused because its run has spent
// RunCostLimit (errors.Is ErrCostLimit too).
var ErrRunCostLimit = fmt.Errorf("%w: the run's expressions spent more than %d operations in all (%d renders at their limit)", ErrCostLimit, RunCostLimit, RunCostLimit/CostLimit)

// budgetFor is a render's budget: CostLimit, or what the run has left
// when that is less.
func budgetFor(vars map[string]any) *budget {
	b := newBudget()
	if s := SpendOf(vars); s != nil {
		b.run = s
		b.left = min(b.left, s.Left)
		b.start = b.left
	}
	return b
}

// settle takes what a render spent from its run, and names the run's
// limit when it was what stopped the render.
func (b *budget) settle(err error) error {
	if b.run == nil {
		return err
	}
	spent := b.start - b.left
	b.run.Left -= spent
	b.run.SinceYield += spent
	if err != nil && errors.Is(err, ErrCostLimit) && b.start < CostLimit {
		return fmt.Errorf("%w (%v)", ErrRunCostLimit, err)
	}
	return err
}
