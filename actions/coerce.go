package actions

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Coerce checks rendered inputs against the action's inputs and converts
// what can be converted without surprise (a number for a string input, a
// numeric string for an int input). It is deterministic: the workflow calls
// it.
func Coerce(a Action, in map[string]any) (map[string]any, error) {
	return CoerceSome(a, in, nil)
}

// CoerceSome is Coerce for an input of which some values are not known
// yet (a plan's inputs that read earlier steps' outputs): those named in
// unknown are neither checked nor required, and not in the result.
func CoerceSome(a Action, in map[string]any, unknown []string) (map[string]any, error) {
	out := make(map[string]any, len(in))
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var problems []string
	for _, k := range keys {
		spec, ok := a.Input(k)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no input %q", a.Name, k))
			continue
		}
		v, err := coerce(spec, in[k])
		if err != nil {
			problems = append(problems, fmt.Sprintf("input %s: %v", k, err))
			continue
		}
		out[k] = v
	}
	for _, spec := range a.Inputs {
		if _, ok := out[spec.Name]; spec.Required && !ok && !slices.Contains(unknown, spec.Name) {
			if _, given := in[spec.Name]; !given {
				problems = append(problems, fmt.Sprintf("input %s is required", spec.Name))
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return out, nil
}

func coerce(spec Input, v any) (any, error) {
	switch spec.Type {
	case TypeString, TypeDuration, TypeMode:
		switch x := v.(type) {
		case string:
			return x, nil
		case int64, float64, bool:
			return fmt.Sprint(x), nil
		}
		return nil, fmt.Errorf("want a string, got %T", v)
	case TypeInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) {
				return int64(x), nil
			}
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
		}
		return nil, fmt.Errorf("want an integer, got %v", v)
	case TypeBool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("want true or false, got %v", v)
	case TypeList:
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("want a list, got %T", v)
		}
		if spec.Elem == "" {
			return list, nil
		}
		out := make([]any, len(list))
		for i, e := range list {
			c, err := coerce(Input{Type: spec.Elem}, e)
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", i+1, err)
			}
			out[i] = c
		}
		return out, nil
	case TypeMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("want a mapping, got %T", v)
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			if s, isStr := e.(string); isStr {
				out[k] = s
			} else {
				out[k] = fmt.Sprint(e)
			}
		}
		return out, nil
	}
	return v, nil
}
