package tftemplate

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Values while rendering are nil (null), string, bool, int64, []any (a
// list) and map[string]any (a map).

// normalize turns a Go value from vars into a template value.
func normalize(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return nil, fmt.Errorf("%d is too large", rv.Uint())
		}
		return int64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return nil, fmt.Errorf("%v: only integer numbers are supported", f)
		}
		return int64(f), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		l := make([]any, rv.Len())
		for i := range l {
			e, err := normalize(rv.Index(i).Interface())
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			l[i] = e
		}
		return l, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("a map needs string keys, not %s", rv.Type().Key())
		}
		m := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			e, err := normalize(it.Value().Interface())
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", it.Key().String(), err)
			}
			m[it.Key().String()] = e
		}
		return m, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return normalize(rv.Elem().Interface())
	}
	return nil, fmt.Errorf("type %T has no template counterpart (string, bool, integer, list or map)", v)
}

// typeName names a value's type as Terraform does.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case int64:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}

// scope holds the for directives' variables.
type scope struct {
	vars   map[string]any
	parent *scope
}

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

type evaluator struct {
	t    *Template
	vars map[string]any
}

func (e *evaluator) errAt(off int, kind error, format string, args ...any) *Error {
	return errAt(e.t.name, e.t.src, off, kind, format, args...)
}

// check finds, before rendering, what Terraform refuses before rendering:
// a reference to a variable vars lacks (in branches not taken too), and a
// call of an unknown function.
func (e *evaluator) check(body []node, locals map[string]bool) error {
	for _, n := range body {
		var err error
		switch n := n.(type) {
		case *interp:
			err = e.checkExpr(n.x, locals)
		case *ifNode:
			if err = e.checkExpr(n.cond, locals); err == nil {
				if err = e.check(n.then, locals); err == nil {
					err = e.check(n.els, locals)
				}
			}
		case *forNode:
			if err = e.checkExpr(n.coll, locals); err == nil {
				inner := map[string]bool{n.val: true}
				if n.key != "" {
					inner[n.key] = true
				}
				for k := range locals {
					inner[k] = true
				}
				err = e.check(n.body, inner)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) checkExpr(x expr, locals map[string]bool) error {
	switch x := x.(type) {
	case *varExpr:
		if _, ok := e.vars[x.name]; !ok && !locals[x.name] {
			return e.errAt(x.off, ErrUndeclared, "vars map does not contain key %q, referenced here", x.name)
		}
	case *callExpr:
		if _, ok := functions[x.name]; !ok {
			return e.errAt(x.off, ErrUnknownFunction, "there is no function named %q", x.name)
		}
		for _, a := range x.args {
			if err := e.checkExpr(a, locals); err != nil {
				return err
			}
		}
	case *listExpr:
		for _, a := range x.elems {
			if err := e.checkExpr(a, locals); err != nil {
				return err
			}
		}
	case *indexExpr:
		if err := e.checkExpr(x.coll, locals); err != nil {
			return err
		}
		return e.checkExpr(x.key, locals)
	case *notExpr:
		return e.checkExpr(x.x, locals)
	case *binExpr:
		if err := e.checkExpr(x.x, locals); err != nil {
			return err
		}
		return e.checkExpr(x.y, locals)
	case *condExpr:
		for _, y := range []expr{x.cond, x.a, x.b} {
			if err := e.checkExpr(y, locals); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *evaluator) render(b *strings.Builder, body []node, sc *scope) error {
	for _, n := range body {
		switch n := n.(type) {
		case text:
			b.WriteString(string(n))
		case *interp:
			v, err := e.eval(n.x, sc)
			if err != nil {
				return err
			}
			s, err := interpString(v)
			if err != nil {
				return e.errAt(n.off, ErrType, "cannot include the value in a string template: %v", err)
			}
			b.WriteString(s)
		case *ifNode:
			v, err := e.eval(n.cond, sc)
			if err != nil {
				return err
			}
			cond, err := toBool(v)
			if err != nil {
				return e.errAt(n.off, ErrType, "the condition of %%{ if } must be a bool: %v", err)
			}
			branch := n.then
			if !cond {
				branch = n.els
			}
			if err := e.render(b, branch, sc); err != nil {
				return err
			}
		case *forNode:
			v, err := e.eval(n.coll, sc)
			if err != nil {
				return err
			}
			iter := func(k, v any) error {
				vars := map[string]any{n.val: v}
				if n.key != "" {
					vars[n.key] = k
				}
				return e.render(b, n.body, &scope{vars: vars, parent: sc})
			}
			switch coll := v.(type) {
			case []any:
				for i, v := range coll {
					if err := iter(int64(i), v); err != nil {
						return err
					}
				}
			case map[string]any:
				keys := make([]string, 0, len(coll))
				for k := range coll {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if err := iter(k, coll[k]); err != nil {
						return err
					}
				}
			default:
				return e.errAt(n.off, ErrType, "%%{ for } needs a list or a map, not a %s", typeName(v))
			}
		}
	}
	return nil
}

func (e *evaluator) eval(x expr, sc *scope) (any, error) {
	switch x := x.(type) {
	case *litExpr:
		return x.v, nil
	case *varExpr:
		if v, ok := sc.lookup(x.name); ok {
			return v, nil
		}
		if v, ok := e.vars[x.name]; ok {
			return v, nil
		}
		return nil, e.errAt(x.off, ErrUndeclared, "vars map does not contain key %q, referenced here", x.name)
	case *listExpr:
		l := make([]any, len(x.elems))
		for i, el := range x.elems {
			v, err := e.eval(el, sc)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	case *indexExpr:
		coll, err := e.eval(x.coll, sc)
		if err != nil {
			return nil, err
		}
		k, err := e.eval(x.key, sc)
		if err != nil {
			return nil, err
		}
		switch coll := coll.(type) {
		case []any:
			i, err := toInt(k)
			if err != nil {
				return nil, e.errAt(x.off, ErrType, "a list index must be a number: %v", err)
			}
			if i < 0 || i >= int64(len(coll)) {
				return nil, e.errAt(x.off, ErrType, "index %d out of range for a list of %d elements", i, len(coll))
			}
			return coll[i], nil
		case map[string]any:
			s, err := toString(k)
			if err != nil {
				return nil, e.errAt(x.off, ErrType, "a map key must be a string: %v", err)
			}
			v, ok := coll[s]
			if !ok {
				return nil, e.errAt(x.off, ErrType, "the map has no element for the key %q", s)
			}
			return v, nil
		}
		return nil, e.errAt(x.off, ErrType, "a %s cannot be indexed", typeName(coll))
	case *notExpr:
		v, err := e.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		b, err := toBool(v)
		if err != nil {
			return nil, e.errAt(x.off, ErrType, "! needs a bool: %v", err)
		}
		return !b, nil
	case *binExpr:
		l, err := e.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		r, err := e.eval(x.y, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "==":
			return reflect.DeepEqual(l, r), nil
		case "!=":
			return !reflect.DeepEqual(l, r), nil
		}
		lb, err := toBool(l)
		if err != nil {
			return nil, e.errAt(x.off, ErrType, "%s needs bools: %v", x.op, err)
		}
		rb, err := toBool(r)
		if err != nil {
			return nil, e.errAt(x.off, ErrType, "%s needs bools: %v", x.op, err)
		}
		if x.op == "&&" {
			return lb && rb, nil
		}
		return lb || rb, nil
	case *condExpr:
		v, err := e.eval(x.cond, sc)
		if err != nil {
			return nil, err
		}
		c, err := toBool(v)
		if err != nil {
			return nil, e.errAt(x.off, ErrType, "the condition must be a bool: %v", err)
		}
		if c {
			return e.eval(x.a, sc)
		}
		return e.eval(x.b, sc)
	case *callExpr:
		f, ok := functions[x.name]
		if !ok {
			return nil, e.errAt(x.off, ErrUnknownFunction, "there is no function named %q", x.name)
		}
		args := make([]any, len(x.args))
		for i, a := range x.args {
			v, err := e.eval(a, sc)
			if err != nil {
				return nil, err
			}
			args[i] = v
		}
		if len(args) < f.min || (f.max >= 0 && len(args) > f.max) {
			return nil, e.errAt(x.off, ErrCall, "%s takes %s, not %d", x.name, f.arity(), len(args))
		}
		v, err := f.call(args)
		if err != nil {
			return nil, e.errAt(x.off, ErrCall, "call to function %q failed: %v", x.name, err)
		}
		return v, nil
	}
	panic(fmt.Sprintf("tftemplate: unknown expression %T", x))
}

// interpString converts an interpolated value to text as Terraform does.
func interpString(v any) (string, error) {
	switch v.(type) {
	case nil:
		return "", errors.New("the value is null")
	case []any, map[string]any:
		return "", fmt.Errorf("string required, got a %s", typeName(v))
	}
	return toString(v)
}

// toString converts a primitive value to a string (Terraform's automatic
// conversion).
func toString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("string required, got a %s", typeName(v))
}

// toBool converts to a bool: a bool, or the string "true" or "false".
func toBool(v any) (bool, error) {
	switch v := v.(type) {
	case bool:
		return v, nil
	case string:
		switch v {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, fmt.Errorf("the string %q is not a bool", v)
	}
	return false, fmt.Errorf("bool required, got a %s", typeName(v))
}

// toInt converts to a number: a number, or a string of decimal digits.
func toInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("the string %q is not a number", v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("number required, got a %s", typeName(v))
}

func toList(v any) ([]any, error) {
	if l, ok := v.([]any); ok {
		return l, nil
	}
	return nil, fmt.Errorf("list required, got a %s", typeName(v))
}
