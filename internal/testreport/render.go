package testreport

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report is a run's summary with its budget check: what `make test`
// prints at its end, and `--output json` gives scripts.
type Report struct {
	Summary
	Slowest []Result `json:"slowest"`
	Factor  float64  `json:"machineFactor"`
	// Calibration is how long Calibrate took at the start and the end.
	Calibration []float64   `json:"calibrationSeconds,omitempty"`
	Violations  []Violation `json:"violations"`
	// Unused are budget lines whose test ran in none of the packages
	// this run finished: renamed or removed tests.
	Unused []string `json:"unusedBudgets,omitempty"`
	// OverGoal are the tests that took longer than Goal (stretched by
	// the machine's factor): the next ones to split or speed up.
	OverGoal []Result `json:"overGoal,omitempty"`
}

// NewReport checks s against b (nil: no budgets) and keeps the top
// slowest tests.
func NewReport(s Summary, b *Budgets, factor float64, top int) Report {
	r := Report{Summary: s, Factor: factor, Violations: []Violation{}}
	r.Slowest = s.Tests[:min(top, len(s.Tests))]
	for _, t := range s.Tests {
		if t.Seconds > Goal.Seconds()*factor {
			r.OverGoal = append(r.OverGoal, t)
		}
	}
	if b == nil {
		return r
	}
	r.Violations = append(r.Violations, b.Check(s.Tests, factor)...)
	ran := map[string]bool{}
	for _, p := range s.Packages {
		ran[p.Package] = true
	}
	seen := map[string]bool{}
	for _, t := range s.Tests {
		seen[t.Package+"\x00"+t.Test] = true
	}
	for key, bud := range b.Tests {
		if ran[bud.Package] && !seen[key] {
			r.Unused = append(r.Unused, fmt.Sprintf("%s:%d: %s %s did not run", b.File, bud.Line, bud.Package, bud.Test))
		}
	}
	return r
}

// WriteJSON writes the report as one JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the tables: packages by wall time, the slowest tests,
// then any budget violation.
func (r Report) WriteText(w io.Writer, module string) error {
	short := func(pkg string) string {
		if rel, ok := strings.CutPrefix(pkg, module+"/"); ok {
			return rel
		}
		return pkg
	}
	fmt.Fprintf(w, "\n== packages by wall time (run %s, machine factor %.2f)\n", seconds(r.Wall), r.Factor)
	fmt.Fprintf(w, "%9s  %-6s  %s\n", "seconds", "result", "package")
	for _, p := range r.Packages {
		if p.Seconds < 0.05 && p.Result == "skip" {
			continue
		}
		fmt.Fprintf(w, "%9.1f  %-6s  %s\n", p.Seconds, p.Result, short(p.Package))
	}
	fmt.Fprintf(w, "\n== %d slowest tests\n", len(r.Slowest))
	// waited: before its turn in its lane, not counted in seconds.
	fmt.Fprintf(w, "%9s  %7s  %-6s  %-50s  %s\n", "seconds", "waited", "result", "test", "package")
	for _, t := range r.Slowest {
		waited := ""
		if t.Waited > 0 {
			waited = fmt.Sprintf("%.1f", t.Waited)
		}
		fmt.Fprintf(w, "%9.1f  %7s  %-6s  %-50s  %s\n", t.Seconds, waited, t.Result, t.Test, short(t.Package))
	}
	for _, t := range r.OverGoal {
		fmt.Fprintf(w, "over the %s goal: %s (%s) took %.1fs\n", Goal, t.Test, short(t.Package), t.Seconds)
	}
	for _, u := range r.Unused {
		fmt.Fprintln(w, "note:", u)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "BUDGET: %s (%s) took %.1fs, allowed %.1fs: %s\n", v.Test, short(v.Package), v.Seconds, v.Allowed, v.Why)
	}
	// Last, where a log's tail keeps it: what each failed test said last.
	for _, f := range r.Failures {
		fmt.Fprintf(w, "\n== FAILED %s (%s), its last reports:\n", f.Test, short(f.Package))
		for _, l := range f.Reported {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	return nil
}

func seconds(s float64) string {
	m := int(s) / 60
	return fmt.Sprintf("%dm%02ds", m, int(s)-60*m)
}
