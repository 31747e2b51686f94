package expr

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// Why not cel-go's own cost tracking (cel.CostLimit): in v0.25 it keeps a
// stack of every value it observed and, inside a comprehension, searches
// it end to end on each step, so a 90,000-step loop took 17 s to be
// measured (not to run: 16 ms); and it charges a call after the call, when
// lists.range(30000000) has already allocated its 30 million items. The
// meter below is linear, and charges the calls whose work is a product of
// their inputs' sizes before they run.

// budget is what one render may still spend; every expression of the
// render draws on it.
type budget struct {
	left  uint64 // cost units
	bytes uint64 // result bytes (MaxResultBytes)
	items uint64 // result list items and map entries (MaxResultItems)
	// run is the run's Spend the render draws on (nil: none), and start
	// what the render could spend when it began.
	run   *Spend
	start uint64
}

func newBudget() *budget {
	return &budget{left: CostLimit, bytes: MaxResultBytes, items: MaxResultItems}
}

// meter is the activation an expression is evaluated in: it resolves the
// variables and holds the evaluation's budget and the last value of every
// watched node, which the calls that read them are charged by. A program
// is shared by concurrent evaluations; a meter is not.
type meter struct {
	vars interpreter.Activation
	b    *budget
	vals []ref.Val // by slot, see decorate
	err  error     // the limit that stopped the evaluation
}

// interruptName is what a comprehension asks its activation after every
// step when the program is built with cel.InterruptCheckFrequency: the
// meter answers by charging the step.
const interruptName = "#interrupted"

func (m *meter) ResolveName(name string) (any, bool) {
	if name == interruptName {
		m.spend(1, overBudget)
		return nil, false
	}
	return m.vars.ResolveName(name)
}

func (m *meter) Parent() interpreter.Activation { return m.vars }

// spend takes n units or stops the evaluation: the panic unwinds to
// cel's Eval, which returns it as its error; Eval then reports m.err.
func (m *meter) spend(n uint64, why func() string) {
	if n <= m.b.left {
		m.b.left -= n
		return
	}
	m.b.left = 0
	m.stop(why())
}

func (m *meter) stop(why string) {
	m.err = &limitError{why: why}
	panic(interpreter.EvalCancelledError{Message: m.err.Error(), Cause: interpreter.CostLimitExceeded})
}

// meterOf finds the meter an evaluation runs in: the root of its
// activations (a comprehension's activation has the enclosing one as
// parent).
func meterOf(a interpreter.Activation) *meter {
	for a != nil {
		if m, ok := a.(*meter); ok {
			return m
		}
		a = a.Parent()
	}
	return nil
}

// unmetered is what a watched node gives when evaluated outside a meter:
// an error rather than unbounded work.
func unmetered(id int64) ref.Val {
	return types.NewErrWithNodeID(id, "expression evaluated without a cost meter")
}

// decorator wraps a program's nodes as they are planned: field reads,
// calls and list/map literals are watched (charged after they run and
// their value kept for the calls that read it); the calls in guarded are
// replaced by a node that evaluates their arguments, charges, then calls.
// Comprehensions are left alone: each step is charged through
// interruptName. slots counts the values a meter must keep.
type decorator struct {
	impls map[string]*functions.Overload // by overload ID and function name
	slots int
}

func (d *decorator) decorate(i interpreter.Interpretable) (interpreter.Interpretable, error) {
	switch x := i.(type) {
	case *watchAttr, *watchCall, *watchCtor, *guardedCall:
		return i, nil // a select adds to an attribute already watched
	case interpreter.InterpretableAttribute:
		return &watchAttr{InterpretableAttribute: x, slot: d.slot()}, nil
	case interpreter.InterpretableConstructor:
		return &watchCtor{InterpretableConstructor: x, slot: d.slot()}, nil
	case interpreter.InterpretableCall:
		if price, ok := guarded[x.Function()]; ok {
			g := &guardedCall{id: x.ID(), fn: x.Function(), overload: x.OverloadID(), args: x.Args(), price: price, slot: d.slot()}
			if x.Function() != "_==_" && x.Function() != "_!=_" {
				g.impl = d.impls[x.OverloadID()]
				if g.impl == nil {
					g.impl = d.impls[x.Function()]
				}
				if g.impl == nil {
					return nil, fmt.Errorf("no implementation of %s to guard", x.Function())
				}
			}
			return g, nil
		}
		w := &watchCall{InterpretableCall: x, slot: d.slot(), cost: callCost(x.Function())}
		for _, a := range x.Args() {
			w.args = append(w.args, d.source(a))
		}
		return w, nil
	}
	return i, nil
}

func (d *decorator) slot() int {
	d.slots++
	return d.slots - 1
}

// source says where a call finds the value of one argument at run time.
func (d *decorator) source(a interpreter.Interpretable) argSource {
	switch x := a.(type) {
	case *watchAttr:
		return argSource{slot: x.slot}
	case *watchCall:
		return argSource{slot: x.slot}
	case *watchCtor:
		return argSource{slot: x.slot}
	case *guardedCall:
		return argSource{slot: x.slot}
	case interpreter.InterpretableConst:
		return argSource{slot: -1, value: x.Value()}
	}
	return argSource{slot: -1} // a comprehension or a logical operator: its own steps were charged
}

type argSource struct {
	slot  int
	value ref.Val
}

func (s argSource) get(m *meter) ref.Val {
	if s.slot >= 0 {
		return m.vals[s.slot]
	}
	return s.value
}

// watchAttr charges a field or variable read: one unit, and n log n for a
// map of n entries it yields (adapting a map sorts its keys, see
// ordered.go).
type watchAttr struct {
	interpreter.InterpretableAttribute
	slot int
}

func (w *watchAttr) Eval(vars interpreter.Activation) ref.Val {
	m := meterOf(vars)
	if m == nil {
		return unmetered(w.ID())
	}
	v := w.InterpretableAttribute.Eval(vars)
	n := uint64(1)
	if mp, ok := v.(traits.Mapper); ok {
		k := size(mp)
		n = add(n, mul(k, uint64(bits.Len64(k))))
	}
	m.spend(n, overBudget)
	m.vals[w.slot] = v
	return v
}

// watchCtor charges a list or map literal by its entries.
type watchCtor struct {
	interpreter.InterpretableConstructor
	slot int
}

func (w *watchCtor) Eval(vars interpreter.Activation) ref.Val {
	m := meterOf(vars)
	if m == nil {
		return unmetered(w.ID())
	}
	v := w.InterpretableConstructor.Eval(vars)
	m.spend(1+uint64(len(w.InitVals())), overBudget)
	m.vals[w.slot] = v
	return v
}

// costKind says how a call is charged after it runs.
type costKind int

const (
	// costScan: one unit, the arguments it reads and the value it makes
	// (ten bytes of a string, or one item of a list, a unit).
	costScan costKind = iota
	// costConstant: one unit whatever the sizes (list concatenation is
	// lazy, the size of a list is stored, an optional wraps a value).
	costConstant
	// costResult: one unit and the value it makes (a slice or reversal
	// copies its result, not its argument).
	costResult
)

// callCost classifies the functions not in guarded.
func callCost(fn string) costKind {
	switch fn {
	case "dyn", "type", "first", "last", "_[_]", "_[?_]", "@not_strictly_false", "!_",
		"optional.of", "optional.ofNonZeroValue", "optional.none", "optional.unwrap", "unwrapOpt",
		"hasValue", "value", "or", "orValue":
		return costConstant
	case "slice", "reverse":
		return costResult
	}
	return costScan
}

// watchCall charges a call after it runs, by its kind.
type watchCall struct {
	interpreter.InterpretableCall
	slot int
	args []argSource
	cost costKind
}

func (w *watchCall) Eval(vars interpreter.Activation) ref.Val {
	m := meterOf(vars)
	if m == nil {
		return unmetered(w.ID())
	}
	v := w.InterpretableCall.Eval(vars)
	n := uint64(1)
	switch {
	case w.cost == costConstant:
	case w.InterpretableCall.Function() == "_+_" && isList(v):
		// lazy concatenation: the map macro's own step is `@result + [x]`
	case w.InterpretableCall.Function() == "size" && !isText(w.args[0].get(m)):
		// a list's or map's size is stored; a string's counts its runes
	case w.cost == costResult:
		n = add(n, shallow(v))
	default:
		for _, a := range w.args {
			n = add(n, shallow(a.get(m)))
		}
		n = add(n, shallow(v))
	}
	m.spend(n, overBudget)
	m.vals[w.slot] = v
	return v
}

// pricer is what a guarded call will cost given its arguments (and what is
// left, to cut off a walk of its arguments early), and why, should it not
// be affordable.
type pricer func(args []ref.Val, left uint64) (uint64, string)

// guardedCall evaluates a call's arguments itself, charges the call from
// them, and only then calls it: the functions whose work is a product of
// their inputs' sizes, which could otherwise do far more than the budget
// in one call.
type guardedCall struct {
	id       int64
	fn       string
	overload string
	args     []interpreter.Interpretable
	impl     *functions.Overload // nil for == and !=
	price    pricer
	slot     int
}

func (g *guardedCall) ID() int64                         { return g.id }
func (g *guardedCall) Function() string                  { return g.fn }
func (g *guardedCall) OverloadID() string                { return g.overload }
func (g *guardedCall) Args() []interpreter.Interpretable { return g.args }

func (g *guardedCall) Eval(vars interpreter.Activation) ref.Val {
	m := meterOf(vars)
	if m == nil {
		return unmetered(g.id)
	}
	vals := make([]ref.Val, len(g.args))
	for i, a := range g.args {
		vals[i] = a.Eval(vars)
		if types.IsUnknownOrError(vals[i]) {
			return vals[i] // every guarded function is strict
		}
	}
	n, why := g.price(vals, m.b.left)
	m.spend(n, func() string {
		if why != "" {
			return why
		}
		return overBudget()
	})
	v := g.call(vals)
	m.vals[g.slot] = v
	return v
}

func (g *guardedCall) call(vals []ref.Val) ref.Val {
	switch g.fn {
	case "_==_":
		return types.Equal(vals[0], vals[1])
	case "_!=_":
		return types.Bool(types.Equal(vals[0], vals[1]) != types.True)
	}
	impl := g.impl
	if impl.OperandTrait != 0 && !vals[0].Type().HasTrait(impl.OperandTrait) {
		return types.NewErrWithNodeID(g.id, "no such overload: %s", g.fn)
	}
	var out ref.Val
	switch {
	case len(vals) == 1 && impl.Unary != nil:
		out = impl.Unary(vals[0])
	case len(vals) == 2 && impl.Binary != nil:
		out = impl.Binary(vals[0], vals[1])
	case impl.Function != nil:
		out = impl.Function(vals...)
	default:
		return types.NewErrWithNodeID(g.id, "no such overload: %s", g.fn)
	}
	return types.LabelErrNode(g.id, out)
}

// guarded prices the calls charged before they run.
var guarded = map[string]pricer{
	"_==_": priceEquality,
	"_!=_": priceEquality,
	"@in": func(a []ref.Val, left uint64) (uint64, string) {
		if l, ok := a[1].(traits.Lister); ok {
			// the needle is compared with every item
			return mul(size(l), add(1, weight(a[0], left))), ""
		}
		return add(1, shallow(a[0])), ""
	},
	"lists.range": func(a []ref.Val, left uint64) (uint64, string) {
		n, ok := a[0].(types.Int)
		if !ok || n <= 0 {
			return 1, ""
		}
		return add(1, uint64(n)), fmt.Sprintf("lists.range(%d) would make %d items, more than the evaluation has left (%d of %d)", n, n, left, CostLimit)
	},
	"replace": func(a []ref.Val, _ uint64) (uint64, string) {
		s, old, repl, ok := texts3(a)
		if !ok {
			return 1, ""
		}
		count := uint64(strings.Count(s, old))
		if old == "" {
			count = uint64(utf8.RuneCountInString(s)) + 1
		}
		if len(a) == 4 {
			if lim, ok := a[3].(types.Int); ok && lim >= 0 {
				count = min(count, uint64(lim))
			}
		}
		out := uint64(len(s))
		if len(repl) > len(old) {
			out = add(out, mul(count, uint64(len(repl)-len(old))))
		}
		return add(1, add(textCost(uint64(len(s))), textCost(out))), fmt.Sprintf("replace would make a string of %d bytes", out)
	},
	"join": func(a []ref.Val, _ uint64) (uint64, string) {
		l, ok := a[0].(traits.Lister)
		if !ok {
			return 1, ""
		}
		var out uint64
		it := l.Iterator()
		for it.HasNext() == types.True {
			if s, ok := it.Next().(types.String); ok {
				out = add(out, uint64(len(s)))
			}
		}
		if n := size(l); len(a) == 2 && n > 1 {
			if sep, ok := a[1].(types.String); ok {
				out = add(out, mul(n-1, uint64(len(sep))))
			}
		}
		return add(1, add(size(l), textCost(out))), fmt.Sprintf("join would make a string of %d bytes", out)
	},
	"split": func(a []ref.Val, _ uint64) (uint64, string) {
		s, ok1 := a[0].(types.String)
		sep, ok2 := a[1].(types.String)
		if !ok1 || !ok2 {
			return 1, ""
		}
		items := uint64(strings.Count(string(s), string(sep))) + 1
		if sep == "" {
			items = uint64(utf8.RuneCountInString(string(s)))
		}
		return add(1, add(textCost(uint64(len(s))), items)), ""
	},
	"format": func(a []ref.Val, left uint64) (uint64, string) {
		f, ok := a[0].(types.String)
		if !ok {
			return 1, ""
		}
		out := add(uint64(len(f)), precisions(string(f)))
		out = add(out, printed(a[1], left*10))
		return add(1, textCost(out)), fmt.Sprintf("format would make a string of about %d bytes", out)
	},
	"flatten": func(a []ref.Val, left uint64) (uint64, string) {
		depth := int64(1)
		if len(a) == 2 {
			if d, ok := a[1].(types.Int); ok {
				depth = int64(d)
			}
		}
		n := flatItems(a[0], depth, left+1)
		return add(1, n), fmt.Sprintf("flatten would make more than %d items", min(n, left))
	},
	"distinct": func(a []ref.Val, left uint64) (uint64, string) {
		l, ok := a[0].(traits.Lister)
		if !ok {
			return 1, ""
		}
		n := size(l)
		// every item is compared with the distinct ones found before it
		return add(1, mul(n, add(n, weight(l, left)))), ""
	},
	"sort":                  priceSort(0),
	"@sortByAssociatedKeys": priceSort(1),
	"sets.contains":         priceSets(false),
	"sets.intersects":       priceSets(false),
	"sets.equivalent":       priceSets(true),
	"matches": func(a []ref.Val, _ uint64) (uint64, string) {
		s, ok1 := a[0].(types.String)
		p, ok2 := a[1].(types.String)
		if !ok1 || !ok2 {
			return 1, ""
		}
		// RE2 runs in time linear in the text times the pattern, and
		// compiles in time linear in the pattern. (cel-go charges a
		// quarter per byte of pattern; a pattern of alternatives runs
		// slower than that.)
		text := textCost(1 + uint64(len(s)))
		return add(add(1, uint64(len(p))), mul(text, uint64(len(p)))), ""
	},
}

func priceEquality(a []ref.Val, left uint64) (uint64, string) {
	return add(1, min(weight(a[0], left), weight(a[1], left))), ""
}

// priceSort: n log n comparisons of the list (or the keys) at arg.
func priceSort(arg int) pricer {
	return func(a []ref.Val, left uint64) (uint64, string) {
		l, ok := a[arg].(traits.Lister)
		if !ok {
			return 1, ""
		}
		n := size(l)
		return add(1, mul(add(n, weight(l, left)), uint64(bits.Len64(n)))), ""
	}
}

// priceSets: each item of one list is looked for in the other.
func priceSets(both bool) pricer {
	return func(a []ref.Val, left uint64) (uint64, string) {
		x, ok1 := a[0].(traits.Lister)
		y, ok2 := a[1].(traits.Lister)
		if !ok1 || !ok2 {
			return 1, ""
		}
		c := mul(size(x), add(size(y), weight(y, left)))
		if both {
			c = add(c, mul(size(y), add(size(x), weight(x, left))))
		}
		return add(1, c), ""
	}
}

func texts3(a []ref.Val) (string, string, string, bool) {
	s, ok1 := a[0].(types.String)
	old, ok2 := a[1].(types.String)
	repl, ok3 := a[2].(types.String)
	return string(s), string(old), string(repl), ok1 && ok2 && ok3
}

// precisions adds up the precisions a format string asks for: `%.999999f`
// prints a million digits.
func precisions(f string) uint64 {
	var sum uint64
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) || f[i+1] != '.' {
			continue
		}
		var p uint64
		j := i + 2
		for ; j < len(f) && f[j] >= '0' && f[j] <= '9'; j++ {
			p = add(mul(p, 10), uint64(f[j]-'0'))
		}
		sum = add(sum, p)
		i = j - 1
	}
	return sum
}

// printed is about how many bytes printing v takes, cut off past max.
func printed(v ref.Val, max uint64) uint64 {
	var n uint64
	var walk func(v ref.Val)
	walk = func(v ref.Val) {
		if n > max {
			return
		}
		switch x := v.(type) {
		case types.String:
			n = add(n, uint64(len(x))+2)
		case types.Bytes:
			n = add(n, 2*uint64(len(x))+2)
		case traits.Mapper:
			it := x.Iterator()
			for it.HasNext() == types.True && n <= max {
				k := it.Next()
				walk(k)
				walk(x.Get(k))
				n = add(n, 4)
			}
		case traits.Lister:
			it := x.Iterator()
			for it.HasNext() == types.True && n <= max {
				walk(it.Next())
				n = add(n, 2)
			}
		default:
			n = add(n, 24)
		}
	}
	walk(v)
	return n
}

// flatItems counts the items flattening l to depth makes, cut off past max.
func flatItems(v ref.Val, depth int64, max uint64) uint64 {
	l, ok := v.(traits.Lister)
	if !ok {
		return 1
	}
	if depth <= 0 {
		return size(l)
	}
	var n uint64
	it := l.Iterator()
	for it.HasNext() == types.True && n <= max {
		n = add(n, flatItems(it.Next(), depth-1, max-n))
	}
	return n
}

// shallow is what reading or making a value costs, not counting what it
// holds: a unit per ten bytes of a string, per item of a list or map.
func shallow(v ref.Val) uint64 {
	switch x := v.(type) {
	case types.String:
		return textCost(uint64(len(x)))
	case types.Bytes:
		return textCost(uint64(len(x)))
	case traits.Sizer:
		return size(x)
	}
	return 0
}

// weight is what comparing or walking a value whole costs: shallow, added
// up through nested lists and maps (a list shared n times counts n times),
// cut off once past max.
func weight(v ref.Val, max uint64) uint64 {
	var n uint64
	var walk func(v ref.Val)
	walk = func(v ref.Val) {
		if n > max {
			return
		}
		switch x := v.(type) {
		case types.String, types.Bytes:
			n = add(n, shallow(x))
		case traits.Mapper:
			n = add(n, size(x))
			it := x.Iterator()
			for it.HasNext() == types.True && n <= max {
				walk(x.Get(it.Next()))
			}
		case traits.Lister:
			n = add(n, size(x))
			it := x.Iterator()
			for it.HasNext() == types.True && n <= max {
				walk(it.Next())
			}
		}
	}
	walk(v)
	return n
}

func textCost(bytes uint64) uint64 { return (bytes + 9) / 10 }

func size(s traits.Sizer) uint64 {
	if n, ok := s.Size().(types.Int); ok && n > 0 {
		return uint64(n)
	}
	return 0
}

func isList(v ref.Val) bool {
	_, ok := v.(traits.Lister)
	return ok
}

func isText(v ref.Val) bool {
	switch v.(type) {
	case types.String, types.Bytes:
		return true
	}
	return false
}

// add and mul saturate: a price past the budget is refused whatever it is.
func add(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

func mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}
