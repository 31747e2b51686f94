package tftemplate

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

type function struct {
	min, max int // max -1: variadic
	call     func(args []any) (any, error)
}

func (f function) arity() string {
	switch {
	case f.max < 0:
		return fmt.Sprintf("at least %d arguments", f.min)
	case f.min == f.max && f.min == 1:
		return "1 argument"
	case f.min == f.max:
		return fmt.Sprintf("%d arguments", f.min)
	}
	return fmt.Sprintf("%d to %d arguments", f.min, f.max)
}

// functions are the Terraform functions templates may call, with
// Terraform's semantics.
var functions = map[string]function{
	"compact":    {1, 1, compact},
	"split":      {2, 2, split},
	"join":       {2, -1, join},
	"indent":     {2, 2, indent},
	"format":     {1, -1, format},
	"formatlist": {1, -1, formatlist},
	"upper":      {1, 1, stringFunc(strings.ToUpper)},
	"lower":      {1, 1, stringFunc(strings.ToLower)},
}

// Functions returns the names of the functions templates may call.
func Functions() []string {
	names := make([]string, 0, len(functions))
	for name := range functions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Indent is Terraform's indent(spaces, s): every line but the first gets
// spaces spaces in front, a line after a final newline included (so
// indent(2, "a\nb\n") is "a\n  b\n  ").
func Indent(spaces int, s string) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", spaces))
}

func stringFunc(f func(string) string) func([]any) (any, error) {
	return func(args []any) (any, error) {
		s, err := toString(args[0])
		if err != nil {
			return nil, err
		}
		return f(s), nil
	}
}

// compact(list) drops the empty strings and nulls of a list of strings.
func compact(args []any) (any, error) {
	l, err := toList(args[0])
	if err != nil {
		return nil, err
	}
	out := []any{}
	for i, v := range l {
		if v == nil {
			continue
		}
		s, err := toString(v)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// split(separator, string); split(",", "") is [""].
func split(args []any) (any, error) {
	sep, err := toString(args[0])
	if err != nil {
		return nil, fmt.Errorf("separator: %w", err)
	}
	s, err := toString(args[1])
	if err != nil {
		return nil, fmt.Errorf("string: %w", err)
	}
	parts := strings.Split(s, sep)
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// join(separator, list, ...) joins the elements of one or more lists.
func join(args []any) (any, error) {
	sep, err := toString(args[0])
	if err != nil {
		return nil, fmt.Errorf("separator: %w", err)
	}
	var parts []string
	for i, a := range args[1:] {
		l, err := toList(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+2, err)
		}
		for j, v := range l {
			if v == nil {
				return nil, fmt.Errorf("argument %d: element %d is null", i+2, j)
			}
			s, err := toString(v)
			if err != nil {
				return nil, fmt.Errorf("argument %d: element %d: %w", i+2, j, err)
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, sep), nil
}

// indent(spaces, string).
func indent(args []any) (any, error) {
	n, err := toInt(args[0])
	if err != nil {
		return nil, fmt.Errorf("spaces: %w", err)
	}
	if n < 0 {
		return nil, fmt.Errorf("spaces: %d is negative", n)
	}
	s, err := toString(args[1])
	if err != nil {
		return nil, fmt.Errorf("string: %w", err)
	}
	return Indent(int(n), s), nil
}

func format(args []any) (any, error) {
	f, err := toString(args[0])
	if err != nil {
		return nil, fmt.Errorf("format: %w", err)
	}
	return sprintf(f, args[1:])
}

// formatlist(format, args...): format once per element of the list
// arguments (all of one length), a non-list argument repeated each time.
func formatlist(args []any) (any, error) {
	f, err := toString(args[0])
	if err != nil {
		return nil, fmt.Errorf("format: %w", err)
	}
	args = args[1:]
	n, chooser := -1, -1
	for i, a := range args {
		l, ok := a.([]any)
		if !ok {
			continue
		}
		if n == -1 {
			n, chooser = len(l), i
		} else if len(l) != n {
			return nil, fmt.Errorf("argument %d has length %d, which is inconsistent with argument %d of length %d", i+2, len(l), chooser+2, n)
		}
	}
	if n == -1 {
		n = 1
	}
	out := make([]any, n)
	for j := range out {
		row := make([]any, len(args))
		for i, a := range args {
			if l, ok := a.([]any); ok {
				row[i] = l[j]
			} else {
				row[i] = a
			}
		}
		s, err := sprintf(f, row)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", j, err)
		}
		out[j] = s
	}
	return out, nil
}

// sprintf implements the verbs of Terraform's format that templates need:
// %s, %d, %v, %t and %%, without flags, width or precision.
func sprintf(f string, args []any) (string, error) {
	var b strings.Builder
	used := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		if i+1 >= len(f) {
			return "", errors.New("format string ends with a lone %")
		}
		i++
		verb := f[i]
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if used >= len(args) {
			return "", fmt.Errorf("not enough arguments for %%%c at offset %d", verb, i-1)
		}
		arg := args[used]
		used++
		if arg == nil {
			return "", fmt.Errorf("argument %d for %%%c is null", used, verb)
		}
		switch verb {
		case 's', 'v':
			s, err := toString(arg)
			if err != nil {
				return "", fmt.Errorf("argument %d for %%%c: %w", used, verb, err)
			}
			b.WriteString(s)
		case 'd':
			n, err := toInt(arg)
			if err != nil {
				return "", fmt.Errorf("argument %d for %%d: %w", used, err)
			}
			b.WriteString(strconv.FormatInt(n, 10))
		case 't':
			v, err := toBool(arg)
			if err != nil {
				return "", fmt.Errorf("argument %d for %%t: %w", used, err)
			}
			b.WriteString(strconv.FormatBool(v))
		default:
			return "", fmt.Errorf("format verb %%%c is not supported here (only %%s, %%d, %%v, %%t and %%%%)", verb)
		}
	}
	if used < len(args) {
		return "", fmt.Errorf("too many arguments; only %d used by the format string", used)
	}
	return b.String(), nil
}
