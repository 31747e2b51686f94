package nodefiles

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

var dropInEnvRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// DropIn renders a [Service] drop-in setting environment variables,
// sorted by name so the same input always gives the same bytes.
func DropIn(env map[string]string) (string, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		if !dropInEnvRE.MatchString(k) {
			return "", fmt.Errorf("environment name %q is not a variable name", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	opts := []*unit.UnitOption{}
	for _, k := range keys {
		v := env[k]
		if strings.ContainsAny(v, "\"\n\\") {
			return "", fmt.Errorf("value of %s holds a quote, backslash or newline", k)
		}
		opts = append(opts, unit.NewUnitOption("Service", "Environment", fmt.Sprintf("%q", k+"="+v)))
	}
	data, err := io.ReadAll(unit.SerializeSections([]*unit.UnitSection{{Section: "Service", Entries: toEntries(opts)}}))
	if err != nil {
		return "", err
	}
	return "# Written by Kedge. Remove this file (and daemon-reload) to go back to the unit's defaults.\n" + string(data), nil
}

func toEntries(opts []*unit.UnitOption) []*unit.UnitEntry {
	out := make([]*unit.UnitEntry, len(opts))
	for i, o := range opts {
		out[i] = &unit.UnitEntry{Name: o.Name, Value: o.Value}
	}
	return out
}
