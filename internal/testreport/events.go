package testreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Event is one line of `go test -json` (cmd/test2json's TestEvent).
type Event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64 // seconds
	Output     string
}

// Result is one finished test or package.
type Result struct {
	Package string  `json:"package"`
	Test    string  `json:"test,omitempty"`
	Seconds float64 `json:"seconds"`
	Result  string  `json:"result"` // pass, fail, skip
	// Waited is how long a parallel test waited for its turn in its lane
	// (LaneWait), taken out of Seconds: the time the test itself took.
	Waited float64 `json:"waitedSeconds,omitempty"`
}

// LaneWait is the line a test logs when it waited for the tests before it
// in its lane (tests that share a world and run one at a time, beside
// the other lanes), e.g. "waited 3m12.5s for its turn in lane typhoon".
// The wait is not the test's own time: the report takes it out.
var LaneWait = regexp.MustCompile(`: waited ([0-9a-zµ.]+) for its turn in lane [\w-]+$`)

// Collector follows a run: it echoes what a non-verbose `go test` prints
// and keeps each top-level test's and package's result.
type Collector struct {
	out io.Writer
	// Progress, when positive, has a passing top-level test that took at
	// least that long named as it ends: a long run shows it is moving.
	Progress time.Duration

	tests    map[string]*Result  // "pkg\x00Test"
	failures []Failure           // in the order they failed
	packages map[string]*Result  // by import path
	held     map[string][]string // output of running tests, by key
	waited   map[string]float64  // lane waits of running tests, by key
	start    time.Time
	end      time.Time
}

// NewCollector echoes to out.
func NewCollector(out io.Writer) *Collector {
	return &Collector{out: out, tests: map[string]*Result{}, packages: map[string]*Result{}, held: map[string][]string{}, waited: map[string]float64{}}
}

// Read follows a whole stream; lines that are not events (a tool's own
// messages, a panic of go itself) are echoed as they are.
func (c *Collector) Read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e Event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(c.out, "%s\n", line)
			continue
		}
		c.Feed(e)
	}
	return sc.Err()
}

// Feed takes one event.
func (c *Collector) Feed(e Event) {
	if !e.Time.IsZero() {
		if c.start.IsZero() || e.Time.Before(c.start) {
			c.start = e.Time
		}
		if e.Time.After(c.end) {
			c.end = e.Time
		}
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(c.out, e.Output)
		return
	case "build-fail":
		return
	}
	if e.Test == "" {
		c.packageEvent(e)
		return
	}
	top, _, sub := strings.Cut(e.Test, "/")
	key := e.Package + "\x00" + top
	switch e.Action {
	case "output":
		// Framing included: in a failing test it says which subtest
		// printed what.
		c.held[key] = append(c.held[key], e.Output)
		if m := LaneWait.FindStringSubmatch(strings.TrimSpace(e.Output)); m != nil && !sub {
			if d, err := time.ParseDuration(m[1]); err == nil {
				c.waited[key] += d.Seconds()
			}
		}
	case "pass", "fail", "skip":
		if sub {
			return
		}
		waited := min(c.waited[key], e.Elapsed)
		r := &Result{Package: e.Package, Test: e.Test, Seconds: e.Elapsed - waited, Result: e.Action, Waited: waited}
		c.tests[key] = r
		if e.Action == "fail" {
			fmt.Fprint(c.out, strings.Join(c.held[key], ""))
			c.failures = append(c.failures, Failure{Package: e.Package, Test: e.Test, Reported: lastReported(c.held[key])})
		} else if c.Progress > 0 && e.Action == "pass" && r.Seconds >= c.Progress.Seconds() {
			fmt.Fprintf(c.out, "--- PASS: %s (%.1fs) %s\n", e.Test, r.Seconds, e.Package)
		}
		delete(c.held, key)
		delete(c.waited, key)
	}
}

// packageEvent handles an event outside any test: the package's own
// output (its closing line, a TestMain's messages, a panic) and its end.
func (c *Collector) packageEvent(e Event) {
	switch e.Action {
	case "output":
		if quietLine(e.Output) {
			return
		}
		fmt.Fprint(c.out, e.Output)
	case "pass", "fail", "skip":
		c.packages[e.Package] = &Result{Package: e.Package, Seconds: e.Elapsed, Result: e.Action}
		// A test still holding output when its package ended never
		// finished (a panic, a timeout): its output is the evidence.
		if e.Action == "fail" {
			for key, lines := range c.held {
				if strings.HasPrefix(key, e.Package+"\x00") {
					fmt.Fprint(c.out, strings.Join(lines, ""))
					delete(c.held, key)
				}
			}
		}
	}
}

// Failure is a failed top-level test and the last lines it reported
// (file_test.go:LINE: ...): the report repeats them at its end, where a
// CI log's tail keeps them when the test's whole output is cut.
type Failure struct {
	Package  string   `json:"package"`
	Test     string   `json:"test"`
	Reported []string `json:"reported"`
}

// How much of a failed test's report the summary repeats.
const (
	failureLines     = 12
	failureLineBytes = 400
)

var reportedLine = regexp.MustCompile(`^\s+[\w.-]+_test\.go:\d+: `)

// lastReported keeps the last lines a test reported through t.Log,
// t.Error or t.Fatal, each cut to failureLineBytes.
func lastReported(output []string) []string {
	var out []string
	for _, o := range strings.Split(strings.Join(output, ""), "\n") {
		if reportedLine.MatchString(o) {
			o = strings.TrimSpace(o)
			if len(o) > failureLineBytes {
				o = o[:failureLineBytes] + "…"
			}
			out = append(out, o)
		}
	}
	return out[max(0, len(out)-failureLines):]
}

// quietLine is package output that `go test` without -v does not print.
func quietLine(s string) bool {
	t := strings.TrimSpace(s)
	return t == "PASS" || strings.HasPrefix(t, "=== RUN") || strings.HasPrefix(t, "=== PAUSE") ||
		strings.HasPrefix(t, "=== CONT") || strings.HasPrefix(t, "=== NAME")
}

// Summary is what a run took.
type Summary struct {
	Wall     float64  `json:"wallSeconds"`
	Packages []Result `json:"packages"` // slowest first
	Tests    []Result `json:"tests"`    // every top-level test, slowest first
	Failed   bool     `json:"failed"`
	// Failures are the failed top-level tests and what they reported last.
	Failures []Failure `json:"failures,omitempty"`
}

// Summary sorts what was collected.
func (c *Collector) Summary() Summary {
	s := Summary{}
	if !c.start.IsZero() {
		s.Wall = c.end.Sub(c.start).Seconds()
	}
	for _, p := range c.packages {
		s.Packages = append(s.Packages, *p)
		s.Failed = s.Failed || p.Result == "fail"
	}
	for _, t := range c.tests {
		s.Tests = append(s.Tests, *t)
	}
	bySeconds(s.Packages)
	bySeconds(s.Tests)
	s.Failures = c.failures
	return s
}

func bySeconds(rs []Result) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Seconds != rs[j].Seconds {
			return rs[i].Seconds > rs[j].Seconds
		}
		if rs[i].Package != rs[j].Package {
			return rs[i].Package < rs[j].Package
		}
		return rs[i].Test < rs[j].Test
	})
}
