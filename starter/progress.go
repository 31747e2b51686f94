package starter

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"kedge.dev/kedge/workflows"
)

// progressPrinter prints one line per change of a step or of a rollout's
// item, so it reads the same in a terminal, a CI log or a pipe.
type progressPrinter struct {
	w    io.Writer
	on   bool
	id   string
	seen map[string]string // row path -> last printed line
}

func newProgressPrinter(w io.Writer, on bool, id string) *progressPrinter {
	return &progressPrinter{w: w, on: on, id: id, seen: map[string]string{}}
}

func (p *progressPrinter) update(pr workflows.Progress) {
	if !p.on {
		return
	}
	v := workflows.NewView(pr, workflows.ViewOptions{})
	// The steps first, then the items of rollouts, so a step's line is
	// never lost among thousands of items'.
	for _, items := range []bool{false, true} {
		for _, r := range v.Rows {
			if r.Kind == workflows.RowHost || (r.Kind == workflows.RowItem) != items {
				continue
			}
			line, ok := rowLine(r, p.id)
			if !ok || p.seen[r.Path] == line {
				continue
			}
			p.seen[r.Path] = line
			fmt.Fprintf(p.w, "%s %s\n", time.Now().Format("15:04:05"), line)
		}
	}
}

// rowLine is the line of a step or of a rollout's item; a pending item
// has none (a rollout may hold thousands).
func rowLine(r workflows.Row, id string) (string, bool) {
	if r.Kind == workflows.RowItem {
		if r.State == workflows.StatePending {
			return "", false
		}
		line := fmt.Sprintf("  %s %-18s %-10s %s", r.Mark, r.Path, r.State, r.What)
		if r.Error != "" {
			line += ": " + r.Error
		}
		return line, true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s %-20s %-10s %s", strings.Repeat("  ", r.Depth), r.Mark, r.Path, r.State, r.What)
	if r.PartsText != "" {
		fmt.Fprintf(&b, " [%s]", r.PartsText)
	}
	b.WriteString(rowNotes(r, id))
	if r.Elapsed != "" && workflows.Ended(r.State) {
		fmt.Fprintf(&b, " (%s)", r.Elapsed)
	}
	// A waiting approval's line clips its prompt: the whole of it
	// follows, for the operator to decide on.
	if r.Prompt != "" && !strings.Contains(r.What, strconv.Quote(r.Prompt)) {
		for _, l := range wrap(r.Prompt, 76) {
			fmt.Fprintf(&b, "\n%s    %s", strings.Repeat("  ", r.Depth), l)
		}
	}
	return b.String(), true
}

// wrap breaks text into lines of at most width runes: each line of the
// text as it is when it fits (a diff in a prompt keeps its columns, a
// blank line stays), else broken at spaces (a longer word gets a line of
// its own).
func wrap(text string, width int) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l = strings.TrimRight(l, " \t")
		if utf8.RuneCountInString(l) <= width {
			lines = append(lines, l)
			continue
		}
		lines = append(lines, wrapWords(l, width)...)
	}
	return lines
}

// wrapWords breaks one line at spaces into lines of at most width runes.
func wrapWords(text string, width int) []string {
	var lines []string
	var line strings.Builder
	for _, w := range strings.Fields(text) {
		if line.Len() > 0 && utf8.RuneCountInString(line.String())+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, line.String())
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	if line.Len() > 0 {
		lines = append(lines, line.String())
	}
	return lines
}

// rowNotes is what the terminal (lines and bars) says after a row's state
// and what it does: a pause, retries, the error, a decision, the undo.
func rowNotes(r workflows.Row, id string) string {
	var b strings.Builder
	switch {
	case r.Paused && r.Waiting != "":
		fmt.Fprintf(&b, " — PAUSED (%s): kedge approve %s --decision continue|abort", r.Waiting, id)
	case r.Paused:
		fmt.Fprintf(&b, " — PAUSED at its failure budget: kedge approve %s --decision continue|abort", id)
	}
	if r.Waiting != "" && !r.Paused {
		fmt.Fprintf(&b, " — %s", r.Waiting)
	}
	if r.Attempts > 1 {
		fmt.Fprintf(&b, " (attempt %d)", r.Attempts)
	}
	if r.WaitingForApproval {
		fmt.Fprintf(&b, " — kedge approve %s --step %s", id, r.Step)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, ": %s", r.Error)
	}
	if r.Decided != "" {
		fmt.Fprintf(&b, " (%s)", r.Decided)
	}
	if r.Undo != "" {
		fmt.Fprintf(&b, " (undo %s)", r.Undo)
	}
	return b.String()
}

// watchJSON is what `kedge watch --output json` prints at the end: the
// progress as the workflow answers it (its fields at the top, as they
// always were) and, under "view", the same as the text front ends show it.
func watchJSON(p workflows.Progress) any {
	return struct {
		workflows.Progress
		View workflows.View `json:"view"`
	}{p, workflows.NewView(p, workflows.ViewOptions{})}
}
