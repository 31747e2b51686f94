package host

import (
	"context"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

var dropInNameRE = regexp.MustCompile(`^[A-Za-z0-9_.@-]+\.conf$`)

// RenderDropIn renders a [Service] drop-in setting environment variables,
// sorted by name so the same input always gives the same bytes.
func RenderDropIn(env map[string]string) (string, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		if !envNameRE.MatchString(k) {
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

// WriteDropIn renders the drop-in and writes it atomically, keeping the
// previous one for undo (host.write-dropin).
func (a *Activities) WriteDropIn(ctx context.Context, in WriteDropInInput) (WriteFileResult, error) {
	if !unitRE.MatchString(in.Unit) {
		return WriteFileResult{}, toTemporal(invalid(fmt.Sprintf("unit %q is not a unit name", in.Unit)))
	}
	if !dropInNameRE.MatchString(in.Name) {
		return WriteFileResult{}, toTemporal(invalid(fmt.Sprintf("drop-in name %q must end in .conf", in.Name)))
	}
	content, err := RenderDropIn(in.Environment)
	if err != nil {
		return WriteFileResult{}, toTemporal(invalid(err.Error()))
	}
	return a.WriteFile(ctx, WriteFileInput{
		Target:  in.Target,
		Path:    path.Join("/etc/systemd/system", in.Unit+".d", in.Name),
		Content: content,
		Mode:    "0644",
	})
}
