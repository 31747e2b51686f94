package expr

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// Variables an expression may use.
var Variables = []string{"params", "steps", "cluster", "host", "item"}

var (
	envOnce sync.Once
	env     *cel.Env
	impls   map[string]*functions.Overload // of the guarded functions, see meter.go
	envErr  error

	cache   sync.Map // source -> *compiled
	checked sync.Map // source -> checkResult
)

func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		opts := []cel.EnvOption{ext.Strings(), ext.Lists(), ext.Sets(), cel.OptionalTypes(),
			cel.CustomTypeAdapter(orderedAdapter{base: types.DefaultTypeAdapter})}
		for _, v := range Variables {
			opts = append(opts, cel.Variable(v, cel.DynType))
		}
		env, envErr = cel.NewEnv(opts...)
		if envErr != nil {
			return
		}
		impls = map[string]*functions.Overload{}
		for name, fn := range env.Functions() {
			if _, ok := guarded[name]; !ok {
				continue
			}
			bindings, err := fn.Bindings()
			if err != nil {
				envErr = fmt.Errorf("bindings of %s: %w", name, err)
				return
			}
			for _, b := range bindings {
				impls[b.Operator] = b
			}
		}
	})
	return env, envErr
}

// Refs are the names an expression reads.
type Refs struct {
	Vars   []string // top-level variables used
	Params []string // params.NAME
	Steps  []string // steps.ID
	// Cost is the most evaluating it may cost, estimated (see sizes):
	// at most CostLimit.
	Cost uint64
}

// Error is an expression error with the column (0-based, within the
// expression source) where it was found.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Check compiles src and reports the names it reads. It refuses an
// expression whose estimated cost is over CostLimit (see sizes). Answers
// are kept: a plan asks again for every host and item.
func Check(src string) (Refs, error) {
	if c, ok := checked.Load(src); ok {
		c := c.(checkResult)
		return c.refs, c.err
	}
	refs, err := check(src)
	checked.Store(src, checkResult{refs, err})
	return refs, err
}

type checkResult struct {
	refs Refs
	err  error
}

func check(src string) (Refs, error) {
	e, err := environment()
	if err != nil {
		return Refs{}, err
	}
	a, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		off := 0
		if errs := iss.Errors(); len(errs) > 0 {
			off = errs[0].Location.Column()
		}
		// third-party message: cel-go's Issues.Err is its issues as one
		// text sorted by position, "ERROR: <input>:1:5: msg\n | src\n |
		// ....^": keep the first one's message.
		msg := strings.TrimSpace(iss.Err().Error())
		if first, _, ok := strings.Cut(msg, "\n"); ok {
			msg = first
		}
		if i := strings.Index(msg, ": "); strings.HasPrefix(msg, "ERROR: <input>:") && i >= 0 {
			rest := msg[len("ERROR: <input>:"):]
			if j := strings.Index(rest, ": "); j >= 0 {
				msg = rest[j+2:]
			}
		}
		return Refs{}, &Error{Offset: off, Msg: msg}
	}
	cost, err := estimate(a)
	if err != nil {
		return Refs{}, err
	}
	refs := Refs{Cost: cost}
	ast.PreOrderVisit(a.NativeRep().Expr(), ast.NewExprVisitor(func(x ast.Expr) {
		switch x.Kind() {
		case ast.IdentKind:
			refs.Vars = appendUnique(refs.Vars, x.AsIdent())
		case ast.SelectKind:
			sel := x.AsSelect()
			if op := sel.Operand(); op.Kind() == ast.IdentKind {
				refs.add(op.AsIdent(), sel.FieldName())
			}
		case ast.CallKind:
			call := x.AsCall()
			if call.FunctionName() == "_[_]" && len(call.Args()) == 2 {
				op, key := call.Args()[0], call.Args()[1]
				if op.Kind() == ast.IdentKind && key.Kind() == ast.LiteralKind {
					if s, ok := key.AsLiteral().(types.String); ok {
						refs.add(op.AsIdent(), string(s))
					}
				}
			}
		}
	}))
	return refs, nil
}

func (r *Refs) add(ident, field string) {
	switch ident {
	case "params":
		r.Params = appendUnique(r.Params, field)
	case "steps":
		r.Steps = appendUnique(r.Steps, field)
	}
}

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// compiled is a program and the number of values its meter keeps.
type compiled struct {
	prog  cel.Program
	slots int
}

func program(src string) (*compiled, error) {
	if p, ok := cache.Load(src); ok {
		return p.(*compiled), nil
	}
	e, err := environment()
	if err != nil {
		return nil, err
	}
	a, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("compile %q: %w", src, iss.Err())
	}
	// No cel.OptOptimize: it would swap calls with constant regexes for
	// precompiled ones, around the meter. InterruptCheckFrequency has every
	// comprehension step ask the meter (see interruptName).
	d := &decorator{impls: impls}
	p, err := e.Program(a, cel.CustomDecorator(d.decorate), cel.InterruptCheckFrequency(1))
	if err != nil {
		return nil, fmt.Errorf("program %q: %w", src, err)
	}
	c := &compiled{prog: p, slots: d.slots}
	cache.Store(src, c)
	return c, nil
}

// Eval evaluates one expression against vars (plain Go values: maps, lists,
// strings, numbers, bools) and returns a plain Go value. It may spend
// CostLimit and hand back MaxResultBytes and MaxResultItems; past either it
// fails with ErrCostLimit.
func Eval(src string, vars map[string]any) (any, error) {
	act, err := activation(vars)
	if err != nil {
		return nil, err
	}
	b := budgetFor(vars)
	v, err := evalIn(src, act, b)
	return v, b.settle(err)
}

// activation holds vars made fit for CEL, each the first time an
// expression of the render reads it (a render of plain text, or of
// expressions that never read `cluster`, does not pay for a thousand
// nodes).
func activation(vars map[string]any) (interpreter.Activation, error) {
	return &lazy{vars: vars, done: map[string]any{}}, nil
}

type lazy struct {
	vars map[string]any
	done map[string]any
}

func (l *lazy) ResolveName(name string) (any, bool) {
	if v, ok := l.done[name]; ok {
		return v, true
	}
	if !slices.Contains(Variables, name) {
		return nil, false
	}
	v := Normalize(l.vars[name])
	l.done[name] = v
	return v, true
}

func (l *lazy) Parent() interpreter.Activation { return nil }

// evalIn evaluates src in act, drawing on b.
func evalIn(src string, act interpreter.Activation, b *budget) (any, error) {
	c, err := program(src)
	if err != nil {
		return nil, err
	}
	m := &meter{vars: act, b: b, vals: make([]ref.Val, c.slots)}
	out, _, err := c.prog.Eval(m)
	if m.err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", src, m.err)
	}
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", src, err)
	}
	v, err := native(out, b)
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", src, err)
	}
	return v, nil
}

// EvalBool evaluates a condition.
func EvalBool(src string, vars map[string]any) (bool, error) {
	v, err := Eval(src, vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition %q gave %T, not a bool", src, v)
	}
	return b, nil
}

// Normalize makes a decoded JSON value fit for CEL: integral float64 values
// become int64 (JSON has one number type; CEL does not mix int and double).
func Normalize(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case int:
		return int64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Normalize(e)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out
	}
	return v
}

// native converts a result to plain Go values, counting what it hands
// back against b: string bytes and list items or map entries, as often as
// each appears.
func native(v ref.Val, b *budget) (any, error) {
	take := func(bytes, items uint64) error {
		if bytes > b.bytes {
			b.bytes = 0
			return &limitError{why: fmt.Sprintf("the result holds more than %d bytes of strings", MaxResultBytes)}
		}
		if items > b.items {
			b.items = 0
			return &limitError{why: fmt.Sprintf("the result holds more than %d list items and map entries", MaxResultItems)}
		}
		b.bytes -= bytes
		b.items -= items
		return nil
	}
	switch x := v.(type) {
	case types.String:
		return string(x), take(uint64(len(x)), 0)
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return int64(x), nil
	case types.Double:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case types.Null:
		return nil, nil
	case types.Duration:
		return x.Duration.String(), nil
	case types.Timestamp:
		return x.Time.UTC().Format("2006-01-02T15:04:05Z07:00"), nil
	case traits.Mapper:
		if err := take(0, size(x)); err != nil {
			return nil, err
		}
		out := map[string]any{}
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			if err := take(uint64(len(ks)), 0); err != nil {
				return nil, err
			}
			e, err := native(x.Get(k), b)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		if err := take(0, size(x)); err != nil {
			return nil, err
		}
		var out []any
		it := x.Iterator()
		for it.HasNext() == types.True {
			e, err := native(it.Next(), b)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	return nil, fmt.Errorf("unsupported value of type %s", v.Type())
}

// Segment is a piece of a template: literal text or an expression.
type Segment struct {
	Text   string
	Expr   string
	IsExpr bool
	Offset int // byte offset of the segment (of the expression for IsExpr) in the template
}

// Template is a string with `${ expr }` interpolations.
type Template []Segment

// ErrUnterminated reports a `${` without its closing brace.
var ErrUnterminated = errors.New("unterminated ${")

// ParseTemplate splits s into literal and expression segments. Braces and
// quotes inside an expression are matched, so `${ {'a': 1}['a'] }` works.
// `$${` is a literal `${`.
func ParseTemplate(s string) (Template, error) {
	var t Template
	var lit strings.Builder
	litStart := 0
	flush := func(end int) {
		if lit.Len() > 0 {
			t = append(t, Segment{Text: lit.String(), Offset: litStart})
			lit.Reset()
		}
		litStart = end
	}
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			lit.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			lit.WriteByte(s[i])
			i++
			continue
		}
		flush(i)
		end, err := closing(s, i+2)
		if err != nil {
			return nil, &Error{Offset: i, Msg: err.Error()}
		}
		raw := s[i+2 : end]
		lead := len(raw) - len(strings.TrimLeft(raw, " \t\n"))
		src := strings.TrimSpace(raw)
		if src == "" {
			return nil, &Error{Offset: i, Msg: "empty ${ }"}
		}
		t = append(t, Segment{Expr: src, IsExpr: true, Offset: i + 2 + lead})
		i = end + 1
		litStart = i
	}
	flush(len(s))
	return t, nil
}

func closing(s string, from int) (int, error) {
	depth := 0
	var quote byte
	for i := from; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '{':
			depth++
		case c == '}':
			if depth == 0 {
				return i, nil
			}
			depth--
		}
	}
	return 0, ErrUnterminated
}

// Single reports whether the template is exactly one expression, in which
// case it renders to the expression's typed value rather than a string.
func (t Template) Single() bool { return len(t) == 1 && t[0].IsExpr }

// HasExpr reports whether the template holds any expression.
func (t Template) HasExpr() bool {
	return slices.ContainsFunc(t, func(s Segment) bool { return s.IsExpr })
}

// Render evaluates the template; its expressions share one budget.
func (t Template) Render(vars map[string]any) (any, error) {
	act, err := activation(vars)
	if err != nil {
		return nil, err
	}
	b := budgetFor(vars)
	v, err := t.render(act, b)
	return v, b.settle(err)
}

func (t Template) render(act interpreter.Activation, b *budget) (any, error) {
	if t.Single() {
		return evalIn(t[0].Expr, act, b)
	}
	var sb strings.Builder
	for _, seg := range t {
		if !seg.IsExpr {
			sb.WriteString(seg.Text)
			continue
		}
		v, err := evalIn(seg.Expr, act, b)
		if err != nil {
			return nil, err
		}
		sb.WriteString(Stringify(v))
	}
	return sb.String(), nil
}

// Stringify formats a value for interpolation into a string.
func Stringify(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = Stringify(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + Stringify(x[k])
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

// RenderWith renders a step's `with` (nil is empty) into the mapping it
// stands for.
func RenderWith(with map[string]any, vars map[string]any) (map[string]any, error) {
	if with == nil {
		with = map[string]any{}
	}
	v, err := RenderValue(with, vars)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// RenderValue renders every string inside v (maps and lists are walked) as a
// template. Every expression in v draws on one budget (CostLimit,
// MaxResultBytes, MaxResultItems): a step's with is bounded as a whole.
func RenderValue(v any, vars map[string]any) (any, error) {
	act, err := activation(vars)
	if err != nil {
		return nil, err
	}
	b := budgetFor(vars)
	out, err := renderValue(v, act, b)
	return out, b.settle(err)
}

func renderValue(v any, act interpreter.Activation, b *budget) (any, error) {
	switch x := v.(type) {
	case string:
		t, err := ParseTemplate(x)
		if err != nil {
			return nil, err
		}
		if !t.HasExpr() {
			if len(t) == 1 {
				return t[0].Text, nil
			}
			return "", nil
		}
		return t.render(act, b)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, act, b)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]any, len(x))
		for _, k := range keys {
			r, err := renderValue(x[k], act, b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}
