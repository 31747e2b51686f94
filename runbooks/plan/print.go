package plan

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Write prints a plan for a terminal: the params, then each wave's steps
// with their hosts, and the plans of the runbooks they call (a rollout's
// first item's, as an example of every item's).
func Write(w io.Writer, p *Plan) {
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
			what = fmt.Sprintf("rollout of %s", s.Runbook)
			if s.Deferred == "" || len(s.Hosts) > 0 {
				what += fmt.Sprintf(", %d at a time, failure budget %d", s.MaxUnavailable, s.FailureBudget)
			}
			if s.Window != nil {
				what += fmt.Sprintf(", starting items only in the window %q for %s (%s)", s.Window.Schedule, s.Window.Duration, cmp.Or(s.Window.TimeZone, "UTC"))
				if len(s.Window.Blackouts) > 0 {
					what += " except " + strings.Join(s.Window.Blackouts, ", ")
				}
			}
			if s.Delay != "" {
				what += ", " + s.Delay + " between items"
			}
			if a := s.Alerts; a != nil {
				what += fmt.Sprintf(", held while %s fire in %s (asked again every %s, pausing after %s)", strings.Join(a.Names, ", "), a.URL, a.Recheck, a.PauseAfter)
			}
		case "approval":
			what = fmt.Sprintf("approval %q", s.Prompt)
		}
		fmt.Fprintf(w, "%s  %-16s %s", indent, s.ID, what)
		switch {
		case len(s.Hosts) > 0:
			fmt.Fprintf(w, " on %s", strings.Join(s.Hosts, ", "))
		case s.Kind == "rollout" && s.Deferred == "" && !s.Skipped:
			fmt.Fprint(w, " on no nodes (skipped)")
		}
		if len(s.Needs) > 0 {
			fmt.Fprintf(w, " after %s", strings.Join(s.Needs, ", "))
		}
		if s.When != "" {
			fmt.Fprintf(w, " when %s", s.When)
		}
		if s.Skipped {
			fmt.Fprint(w, " (skipped: false now)")
		}
		if len(s.Undo) > 0 {
			fmt.Fprintf(w, " (undo: %s)", strings.Join(s.Undo, ", "))
		}
		if s.Deferred != "" {
			fmt.Fprintf(w, " [%s]", s.Deferred)
		}
		if s.Error != "" {
			fmt.Fprintf(w, " [will fail if it runs: %s]", s.Error)
		}
		fmt.Fprintln(w)
		switch {
		case s.Child != nil:
			writeSteps(w, s.Child, indent+"    ")
		case len(s.Items) > 0:
			fmt.Fprintf(w, "%s    each item, e.g. %s:\n", indent, s.Items[0].Item)
			writeSteps(w, s.Items[0].Plan, indent+"    ")
		}
	}
}
