package runbooks

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"kedge.dev/kedge/runbooks/inventory"

	"kedge.dev/kedge/actions/imageref"
)

// CoerceParam converts a value (from YAML, JSON, an expression or a --set
// string) to the param's type. Node selectors are resolved against cluster;
// with a nil cluster they are only checked for shape.
func CoerceParam(p Param, val any, cluster *inventory.Cluster) (any, error) {
	if f, ok := val.(float64); ok && f == float64(int64(f)) {
		val = int64(f)
	}
	if i, ok := val.(int); ok {
		val = int64(i)
	}
	switch p.Type {
	case ParamString:
		switch x := val.(type) {
		case string:
			return x, nil
		case int64, bool:
			return fmt.Sprint(x), nil
		}
	case ParamInt:
		switch x := val.(type) {
		case int64:
			return x, nil
		case string:
			n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer", x)
			}
			return n, nil
		}
	case ParamBool:
		switch x := val.(type) {
		case bool:
			return x, nil
		case string:
			b, err := strconv.ParseBool(x)
			if err != nil {
				return nil, fmt.Errorf("%q is not true or false", x)
			}
			return b, nil
		}
	case ParamDuration:
		if s, ok := val.(string); ok {
			d, err := time.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not a duration (examples: 30s, 5m, 1h30m)", s)
			}
			return d.String(), nil
		}
	case ParamList:
		items, err := stringList(val)
		if err != nil {
			return nil, err
		}
		out := make([]any, len(items))
		for i, s := range items {
			out[i] = s
		}
		return out, nil
	case ParamImage:
		if s, ok := val.(string); ok {
			if err := ValidateImage(s); err != nil {
				return nil, err
			}
			return s, nil
		}
	case ParamNodes:
		sels, err := stringList(val)
		if err != nil {
			return nil, err
		}
		return resolveNodes(sels, cluster)
	default:
		return nil, fmt.Errorf("unknown param type %q", p.Type)
	}
	return nil, fmt.Errorf("want a %s, got %s", p.Type, describe(val))
}

// ValidateImage checks an OCI image reference such as
// quay.io/poseidon/kubelet:v1.35.4 (a tag or digest is required: the image
// is what a runbook pins).
func ValidateImage(s string) error { return imageref.Check(s) }

func stringList(val any) ([]string, error) {
	switch x := val.(type) {
	case string:
		if strings.TrimSpace(x) == "" {
			return []string{}, nil
		}
		parts := strings.Split(x, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts, nil
	case []string:
		return x, nil
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("list item %d is %s, not a string", i+1, describe(e))
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list, got %s", describe(val))
}

// resolveNodes is SelectNodes as a param's value.
func resolveNodes(sels []string, cluster *inventory.Cluster) ([]any, error) {
	names, err := SelectNodes(sels, cluster)
	if err != nil || names == nil {
		return nil, err
	}
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return out, nil
}

// SelectNodes turns selectors (all, controllers, workers, or node names)
// into node names, in inventory order, without duplicates. With a nil
// cluster it selects nothing.
func SelectNodes(sels []string, cluster *inventory.Cluster) ([]string, error) {
	if cluster == nil {
		return nil, nil
	}
	want := map[string]bool{}
	for _, sel := range sels {
		names, err := cluster.Select(sel)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			want[n] = true
		}
	}
	out := []string{}
	for _, n := range cluster.Nodes() {
		if want[n.Name] {
			out = append(out, n.Name)
		}
	}
	return out, nil
}

// MissingParamError is a required param that was not given.
type MissingParamError struct {
	Runbook, Param, Type string
}

func (e *MissingParamError) Error() string {
	return fmt.Sprintf("runbook %s needs param %q (%s); set it with --set %s=VALUE", e.Runbook, e.Param, e.Type, e.Param)
}

// ResolveParams checks and types the values given for a runbook's params,
// filling defaults. Unknown names, missing required params and bad values
// are errors; all of them are reported together.
func ResolveParams(rb *Runbook, given map[string]any, cluster *inventory.Cluster) (map[string]any, error) {
	var errs []error
	out := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if !slices.ContainsFunc(rb.Params, func(p Param) bool { return p.Name == name }) {
			var names []string
			for _, p := range rb.Params {
				names = append(names, p.Name)
			}
			errs = append(errs, fmt.Errorf("runbook %s has no param %q%s", rb.Name, name, suggest(name, names)))
		}
	}
	for _, p := range rb.Params {
		val, ok := given[p.Name]
		if !ok {
			if p.Required {
				errs = append(errs, &MissingParamError{Runbook: rb.Name, Param: p.Name, Type: p.Type})
				continue
			}
			if p.Default == nil {
				out[p.Name] = zero(p.Type)
				continue
			}
			val = p.Default
		}
		v, err := CoerceParam(p, val, cluster)
		if err != nil {
			errs = append(errs, fmt.Errorf("param %s: %w", p.Name, err))
			continue
		}
		out[p.Name] = v
	}
	return out, errors.Join(errs...)
}

func zero(typ string) any {
	switch typ {
	case ParamInt:
		return int64(0)
	case ParamBool:
		return false
	case ParamList, ParamNodes:
		return []any{}
	case ParamDuration:
		return "0s"
	}
	return ""
}

// SecretParams names the params declared secret.
func (rb *Runbook) SecretParams() []string {
	var out []string
	for _, p := range rb.Params {
		if p.Secret {
			out = append(out, p.Name)
		}
	}
	return out
}
