package starter

import (
	"fmt"
	"io"
	"strings"
	"time"

	"kedge.dev/kedge/workflows"
)

// progressPrinter prints one line per step state change, so it reads the
// same in a terminal, a CI log or a pipe.
type progressPrinter struct {
	w    io.Writer
	on   bool
	id   string
	seen map[string]string // step -> last printed state line
}

func newProgressPrinter(w io.Writer, on bool, id string) *progressPrinter {
	return &progressPrinter{w: w, on: on, id: id, seen: map[string]string{}}
}

func (p *progressPrinter) update(pr workflows.Progress) {
	if !p.on {
		return
	}
	for _, s := range pr.Steps {
		line := stepLine(s, p.id)
		if p.seen[s.ID] == line {
			continue
		}
		p.seen[s.ID] = line
		fmt.Fprintf(p.w, "%s %s\n", time.Now().Format("15:04:05"), line)
	}
	// A rollout's items: one line per change, pending ones left out (a
	// rollout may hold thousands).
	for _, s := range pr.Steps {
		for _, it := range s.Items {
			if it.State == workflows.StatePending {
				continue
			}
			key := s.ID + "/" + it.ID
			line := fmt.Sprintf("  %-18s %-10s runbook %s", key, it.State, it.Child)
			if it.LastError != "" {
				line += ": " + it.LastError
			}
			if p.seen[key] == line {
				continue
			}
			p.seen[key] = line
			fmt.Fprintf(p.w, "%s %s\n", time.Now().Format("15:04:05"), line)
		}
	}
}

func stepLine(s workflows.StepProgress, id string) string {
	what := s.Action
	switch s.Kind {
	case "runbook":
		what = "runbook " + s.Child
	case "rollout":
		what = "rollout " + s.Child
	case "approval":
		what = fmt.Sprintf("approval %q", s.Prompt)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %-10s %s", s.ID, s.State, what)
	if len(s.Hosts) > 0 {
		counts := map[string]int{}
		for _, h := range s.Hosts {
			counts[h.State]++
		}
		var parts []string
		for _, st := range []string{workflows.StateSucceeded, workflows.StateRunning, workflows.StateFailed, workflows.StateCancelled} {
			if counts[st] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
			}
		}
		fmt.Fprintf(&b, " [%d hosts: %s]", len(s.Hosts), strings.Join(parts, ", "))
	}
	if len(s.Items) > 0 {
		counts := map[string]int{}
		for _, it := range s.Items {
			counts[it.State]++
		}
		var parts []string
		for _, st := range []string{workflows.StateSucceeded, workflows.StateUndone, workflows.StateRunning, workflows.StateFailed, workflows.StatePending} {
			if counts[st] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
			}
		}
		fmt.Fprintf(&b, " [%d items: %s]", len(s.Items), strings.Join(parts, ", "))
	}
	if s.Paused {
		fmt.Fprintf(&b, " — PAUSED at its failure budget: kedge approve %s --decision continue|abort", id)
	}
	if s.Attempts > 1 {
		fmt.Fprintf(&b, " (attempt %d)", s.Attempts)
	}
	if s.State == workflows.StateWaiting {
		fmt.Fprintf(&b, " — kedge approve %s --step %s", id, s.ID)
	}
	if s.LastError != "" && (s.State == workflows.StateFailed || s.State == workflows.StateRunning) {
		fmt.Fprintf(&b, ": %s", s.LastError)
	}
	if s.Undo != "" {
		fmt.Fprintf(&b, " (undo %s)", s.Undo)
	}
	return b.String()
}
