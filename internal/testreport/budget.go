package testreport

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

const (
	// Unlisted is the longest a test may run without a line in the
	// budget file, on the reference machine.
	Unlisted = 60 * time.Second
	// Goal is the longest a test should run on the reference machine:
	// the report names every test over it.
	Goal = 5 * time.Minute
	// MaxBudget is the largest budget a line may give.
	MaxBudget = 15 * time.Minute
	// Slack is how far past its budget a listed test may run.
	Slack = 2
)

// Budget is one line of the budget file: a test allowed over Unlisted.
type Budget struct {
	Package string // import path
	Test    string
	Limit   time.Duration
	Reason  string
	Line    int
}

// Budgets is a parsed budget file.
type Budgets struct {
	File string
	// Machine is how long Calibrate took on the machine the budgets
	// were measured on.
	Machine time.Duration
	Tests   map[string]Budget // "pkg\x00Test"
}

// LoadBudgets reads a budget file; module is the module's path, which
// the file's package names are relative to.
func LoadBudgets(path, module string) (*Budgets, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseBudgets(path, module, f)
}

// ParseBudgets reads budget lines:
//
//	machine DURATION
//	PACKAGE TEST DURATION REASON...
//
// Blank lines and lines starting with # are skipped. Errors name the
// file, line and field.
func ParseBudgets(name, module string, r io.Reader) (*Budgets, error) {
	b := &Budgets{File: name, Tests: map[string]Budget{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		at := func(field, format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s: %s", name, n, field, fmt.Sprintf(format, args...))
		}
		if fields[0] == "machine" {
			if len(fields) != 2 {
				return nil, at("machine", "want `machine DURATION`")
			}
			d, err := time.ParseDuration(fields[1])
			if err != nil || d <= 0 {
				return nil, at("machine", "%q is not a positive duration", fields[1])
			}
			b.Machine = d
			continue
		}
		if len(fields) < 4 {
			return nil, at("reason", "want `PACKAGE TEST DURATION REASON`: every budget says why the test is slow")
		}
		pkg, test := module+"/"+fields[0], fields[1]
		if fields[0] == "." {
			pkg = module
		}
		if !strings.HasPrefix(test, "Test") || strings.Contains(test, "/") {
			return nil, at("test", "%q is not a top-level test", test)
		}
		d, err := time.ParseDuration(fields[2])
		if err != nil || d <= 0 {
			return nil, at("budget", "%q is not a positive duration", fields[2])
		}
		if d <= Unlisted {
			return nil, at("budget", "%s: only tests allowed over %s are listed", d, Unlisted)
		}
		if d > MaxBudget {
			return nil, at("budget", "%s: no test may take over %s; split it or share its world", d, MaxBudget)
		}
		key := pkg + "\x00" + test
		if prev, dup := b.Tests[key]; dup {
			return nil, at("test", "%s %s is already listed on line %d", fields[0], test, prev.Line)
		}
		b.Tests[key] = Budget{Package: pkg, Test: test, Limit: d, Reason: strings.Join(fields[3:], " "), Line: n}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if b.Machine == 0 {
		return nil, fmt.Errorf("%s: machine: missing: the calibration's time on the machine the budgets were measured on (`machine DURATION`)", name)
	}
	return b, nil
}

// Violation is a test that ran past what it is allowed.
type Violation struct {
	Result
	Allowed float64 `json:"allowedSeconds"`
	Why     string  `json:"why"`
}

// Check returns the tests that ran past their budget times Slack or past
// Unlisted without a budget, each limit stretched by factor (this
// machine's measure against the reference's, at least 1).
func (b *Budgets) Check(tests []Result, factor float64) []Violation {
	var vs []Violation
	for _, t := range tests {
		if t.Result != "pass" && t.Result != "fail" {
			continue
		}
		bud, listed := b.Tests[t.Package+"\x00"+t.Test]
		switch {
		case listed && t.Seconds > Slack*bud.Limit.Seconds()*factor:
			vs = append(vs, Violation{t, Slack * bud.Limit.Seconds() * factor, fmt.Sprintf("over twice its budget of %s (%s:%d)", bud.Limit, b.File, bud.Line)})
		case !listed && t.Seconds > Unlisted.Seconds()*factor:
			vs = append(vs, Violation{t, Unlisted.Seconds() * factor, fmt.Sprintf("over %s and not in %s: list it with its budget and why it is slow", Unlisted, b.File)})
		}
	}
	return vs
}

// Factor is how much slower this machine measured than the reference:
// the slower of its measures over the reference's, never below 1.
func (b *Budgets) Factor(measured ...time.Duration) float64 {
	f := 1.0
	for _, m := range measured {
		if r := m.Seconds() / b.Machine.Seconds(); r > f {
			f = r
		}
	}
	return f
}
