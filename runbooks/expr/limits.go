package expr

import (
	"errors"
	"fmt"
)

// Limits on what evaluating expressions may spend. Expressions run inside
// workflow code: Temporal fails a workflow task whose code does not yield
// for a second ("Potential deadlock detected") and retries it for ever,
// and the worker's memory is shared by every run it serves. So a render
// (a step's when, its on, its whole with, a rollout's over) is bounded in
// work and in what it hands back, and stops with ErrCostLimit past either:
// deterministically, so a replay stops where the run did.
const (
	// CostLimit bounds the work of one render, in units of about one
	// operation: a function call, a field read, a step of a comprehension,
	// a list item or map entry read or made, ten bytes of a string read or
	// made. Functions whose work is a product of their inputs' sizes
	// (lists.range, replace, join, format, flatten, distinct, sort, sets.*,
	// matches, in, ==) are charged before they run, so no single call does
	// more than what is left. A million units take well under a second.
	CostLimit = 1_000_000
	// MaxResultBytes bounds the string bytes a render hands back, counted
	// as often as a value appears: 100,000 references to one 1 MiB string
	// cost little to build but would be 100 GB of activity input.
	MaxResultBytes = 4 << 20
	// MaxResultItems bounds the list items and map entries a render hands
	// back, counted the same way.
	MaxResultItems = 100_000
	// AssumedSize is the size validation assumes for a list, map or string
	// it cannot know (a param, a step's output): the static estimate
	// (Check) refuses what would cost more than CostLimit at that size.
	AssumedSize = 100
)

// ErrCostLimit is the error of an evaluation stopped by a limit (errors.Is).
var ErrCostLimit = errors.New("expression cost limit exceeded")

// limitError says which limit stopped an evaluation, and how.
type limitError struct{ why string }

func (e *limitError) Error() string { return ErrCostLimit.Error() + ": " + e.why }
func (e *limitError) Unwrap() error { return ErrCostLimit }

// overBudget is the reason of a render that ran out of units.
func overBudget() string {
	return fmt.Sprintf("evaluating it takes more than %d operations (comprehension steps, calls, list items and string bytes read or made); walk smaller lists or split the work across steps", CostLimit)
}
