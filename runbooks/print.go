package runbooks

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// WritePlan prints a plan for a terminal.
func WritePlan(w io.Writer, p *Plan) {
	fmt.Fprintf(w, "runbook %s on cluster %s\n", p.Runbook, p.Cluster)
	for _, k := range slices.Sorted(maps.Keys(p.Params)) {
		fmt.Fprintf(w, "  param %s = %v\n", k, p.Params[k])
	}
	writeSteps(w, p, "  ")
}

func writeSteps(w io.Writer, p *Plan, indent string) {
	wave := 0
	for _, s := range p.Steps {
		if s.Wave != wave {
			wave = s.Wave
			fmt.Fprintf(w, "%swave %d\n", indent, wave)
		}
		what := s.Action
		switch s.Kind {
		case "runbook":
			what = "runbook " + s.Runbook
		case "rollout":
			what = fmt.Sprintf("rollout of %s, %s at a time, failure budget %s", s.Runbook, orDefault(s.MaxUnavailable, "1"), orDefault(s.FailureBudget, "0"))
		case "approval":
			what = fmt.Sprintf("approval %q", s.Prompt)
		}
		fmt.Fprintf(w, "%s  %-16s %s", indent, s.ID, what)
		if len(s.Hosts) > 0 {
			fmt.Fprintf(w, " on %s", strings.Join(s.Hosts, ", "))
		} else if s.Kind == "rollout" && s.Deferred == "" {
			fmt.Fprint(w, " on no nodes (skipped)")
		}
		if len(s.Needs) > 0 {
			fmt.Fprintf(w, " after %s", strings.Join(s.Needs, ", "))
		}
		if s.When != "" {
			fmt.Fprintf(w, " when %s", s.When)
		}
		if s.Undo != "" {
			fmt.Fprintf(w, " (undo: %s)", s.Undo)
		}
		if s.Deferred != "" {
			fmt.Fprintf(w, " [%s]", s.Deferred)
		}
		fmt.Fprintln(w)
		if s.Child != nil {
			if s.Kind == "rollout" {
				fmt.Fprintf(w, "%s    each node, e.g. %s:\n", indent, s.Hosts[0])
			}
			writeSteps(w, s.Child, indent+"    ")
		}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
