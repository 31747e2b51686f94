package testreport

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// run.jsonl is what `go test -json -count=1 ./...` printed for a module
// with a TestMain that prints, a slow test with a subtest, a failing test
// with a failing subtest, a skipped test, parallel tests, a package without
// tests and one that does not build.
func collect(t *testing.T) (*Collector, string) {
	t.Helper()
	f, err := os.Open("testdata/run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	c := NewCollector(&out)
	c.Progress = time.Second
	if err := c.Read(f); err != nil {
		t.Fatal(err)
	}
	return c, out.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// The echo is what `go test` without -v prints: the failing test's whole
// output (with -v's framing, which says which subtest printed what),
// package lines, the build failure; not the passing tests' logs.
func TestEchoIsQuietGoTest(t *testing.T) {
	_, out := collect(t)
	for _, want := range []string{
		"world: started\n",
		"--- FAIL: TestBroken (",
		"a_test.go:22: evidence line\n",
		"--- FAIL: TestBroken/sub (",
		"a_test.go:23: sub failed\n",
		"FAIL\texample.com/sample/a\t",
		"ok  \texample.com/sample/b\t",
		"?   \texample.com/sample/c\t[no test files]\n",
		"d_test.go:5:28: undefined: undefined\n",
		"FAIL\texample.com/sample/d [build failed]\n",
		"--- PASS: TestSlow (1.", // the progress line of a test over 1s
	} {
		if !strings.Contains(out, want) {
			t.Errorf("echo lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"=== RUN   TestQuick", "=== RUN   TestSlow", "quick says hello", "par2", "--- PASS: TestQuick", "\nPASS\n"} {
		if strings.Contains(out, not) {
			t.Errorf("echo has %q, which quiet go test does not print:\n%s", not, out)
		}
	}
	golden(t, "run.echo", out)
}

func TestSummary(t *testing.T) {
	c, _ := collect(t)
	s := c.Summary()
	if !s.Failed {
		t.Error("a run with a failing package is not Failed")
	}
	if len(s.Tests) == 0 || s.Tests[0].Test != "TestSlow" || s.Tests[0].Seconds < 1.2 {
		t.Fatalf("slowest test %+v, want TestSlow at 1.3s", s.Tests)
	}
	for _, r := range s.Tests {
		if strings.Contains(r.Test, "/") {
			t.Errorf("subtest %s counted as a test", r.Test)
		}
	}
	results := map[string]string{}
	for _, r := range s.Tests {
		results[r.Test] = r.Result
	}
	want := map[string]string{"TestQuick": "pass", "TestSlow": "pass", "TestBroken": "fail", "TestSkipped": "skip", "TestPar1": "pass", "TestPar2": "pass"}
	for k, v := range want {
		if results[k] != v {
			t.Errorf("%s: %q, want %q", k, results[k], v)
		}
	}
	if len(s.Tests) != len(want) {
		t.Errorf("%d tests, want %d: %+v", len(s.Tests), len(want), s.Tests)
	}
	pkgs := map[string]string{}
	for _, p := range s.Packages {
		pkgs[strings.TrimPrefix(p.Package, "example.com/sample/")] = p.Result
	}
	if pkgs["a"] != "fail" || pkgs["b"] != "pass" || pkgs["c"] != "skip" || pkgs["d"] != "fail" {
		t.Errorf("packages %v", pkgs)
	}
	if s.Wall < 1 {
		t.Errorf("wall %.2fs, want the run's span", s.Wall)
	}
}

const module = "example.com/sample"

func TestBudgetErrorsNameFileLineField(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"machine 1s\na TestSlow 2m\n", "b.txt:2: reason: "},
		{"machine 1s\na TestSlow soon slow because\n", `b.txt:2: budget: "soon" is not a positive duration`},
		{"machine 1s\na TestSlow 30s slow because\n", "b.txt:2: budget: 30s: only tests allowed over 1m0s are listed"},
		{"machine 1s\na TestSlow 16m slow because\n", "b.txt:2: budget: 16m0s: no test may take over 15m0s"},
		{"machine 1s\na TestSlow/inner 2m slow because\n", `b.txt:2: test: "TestSlow/inner" is not a top-level test`},
		{"machine 1s\n# c\na TestSlow 2m x\na TestSlow 3m y\n", "b.txt:4: test: a TestSlow is already listed on line 3"},
		{"a TestSlow 2m slow because\n", "b.txt: machine: missing"},
		{"machine fast\n", `b.txt:1: machine: "fast" is not a positive duration`},
	} {
		_, err := ParseBudgets("b.txt", module, strings.NewReader(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.body, err, c.want)
		}
	}
}

func TestBudgetCheck(t *testing.T) {
	b, err := ParseBudgets("b.txt", module, strings.NewReader("machine 500ms\n\na TestListed 2m slow because it waits\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []Result{
		{Package: module + "/a", Test: "TestListed", Seconds: 239, Result: "pass"},     // under 2 x 2m
		{Package: module + "/a", Test: "TestUnlisted", Seconds: 59, Result: "pass"},    // under 60s
		{Package: module + "/b", Test: "TestListed", Seconds: 100, Result: "pass"},     // listed in a, not b
		{Package: module + "/a", Test: "TestSkipped", Seconds: 100, Result: "skip"},    // not run
		{Package: module + "/a", Test: "TestFailedSlow", Seconds: 301, Result: "fail"}, // unlisted, failing too
	}
	got := map[string]string{}
	for _, v := range b.Check(tests, 1) {
		got[strings.TrimPrefix(v.Package, module+"/")+" "+v.Test] = v.Why
	}
	if len(got) != 2 || !strings.Contains(got["b TestListed"], "not in b.txt") || !strings.Contains(got["a TestFailedSlow"], "not in b.txt") {
		t.Errorf("violations %v, want b's TestListed and TestFailedSlow unlisted", got)
	}
	tests[0].Seconds = 241
	if vs := b.Check(tests[:1], 1); len(vs) != 1 || !strings.Contains(vs[0].Why, "over twice its budget of 2m0s (b.txt:3)") {
		t.Errorf("241s against a 2m budget: %+v", vs)
	}
	// On a machine that measured twice as slow, twice as long is allowed.
	f := b.Factor(400*time.Millisecond, time.Second)
	if f != 2 {
		t.Fatalf("factor %v, want 2 (the slower measure over the reference)", f)
	}
	if vs := b.Check(tests[:4], f); len(vs) != 0 {
		t.Errorf("on a machine twice as slow: %+v", vs)
	}
	if f := b.Factor(100 * time.Millisecond); f != 1 {
		t.Errorf("a faster machine's factor %v, want 1", f)
	}
}

func TestReportNamesUnusedBudgets(t *testing.T) {
	c, _ := collect(t)
	b, err := ParseBudgets("b.txt", module, strings.NewReader("machine 1s\nb TestGone 2m it was slow\nd TestD 2m did not build\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReport(c.Summary(), b, 1, 3)
	if len(r.Slowest) != 3 || r.Slowest[0].Test != "TestSlow" {
		t.Errorf("slowest %+v", r.Slowest)
	}
	if len(r.Unused) != 2 {
		t.Errorf("unused %v, want TestGone (its package ran) and TestD", r.Unused)
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text, module); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== packages by wall time", "== 3 slowest tests", "TestSlow", "b.txt:2: " + module + "/b TestGone did not run"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(js.String(), `"slowest": [`) || !strings.Contains(js.String(), `"machineFactor": 1`) {
		t.Errorf("json:\n%s", js.String())
	}
}

// A test over the 5-minute goal is named at the end, on the machine's
// own measure: on a machine twice as slow, 301 s is within it.
func TestReportNamesTestsOverTheGoal(t *testing.T) {
	s := Summary{Tests: []Result{{Package: module + "/a", Test: "TestLong", Seconds: 301, Result: "pass"}, {Package: module + "/a", Test: "TestShort", Seconds: 299, Result: "pass"}}}
	r := NewReport(s, nil, 1, 20)
	if len(r.OverGoal) != 1 || r.OverGoal[0].Test != "TestLong" {
		t.Errorf("over the goal: %+v, want TestLong", r.OverGoal)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, module); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "over the 5m0s goal: TestLong (a) took 301.0s") {
		t.Errorf("text:\n%s", text.String())
	}
	if r := NewReport(s, nil, 2, 20); len(r.OverGoal) != 0 {
		t.Errorf("factor 2: %+v", r.OverGoal)
	}
}

// A parallel test's wait for its turn in its lane is not its own time:
// the report takes it out (and says it), so a budget holds the test to
// what it takes, whatever ran before it in the lane.
func TestLaneWaitIsNotTheTestsTime(t *testing.T) {
	var out bytes.Buffer
	c := NewCollector(&out)
	c.Progress = time.Second
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	for _, e := range []Event{
		{Time: at, Action: "run", Package: "p", Test: "TestLate"},
		{Time: at, Action: "output", Package: "p", Test: "TestLate", Output: "    lane_test.go:40: waited 2m30.5s for its turn in lane typhoon\n"},
		{Time: at, Action: "output", Package: "p", Test: "TestLate/sub", Output: "        x_test.go:9: waited 9m for its turn in lane other\n"},
		{Time: at, Action: "pass", Package: "p", Test: "TestLate", Elapsed: 200.5},
		{Time: at, Action: "run", Package: "p", Test: "TestPlain"},
		{Time: at, Action: "output", Package: "p", Test: "TestPlain", Output: "    a_test.go:3: waited for nothing\n"},
		{Time: at, Action: "pass", Package: "p", Test: "TestPlain", Elapsed: 3},
	} {
		c.Feed(e)
	}
	got := map[string]Result{}
	for _, r := range c.Summary().Tests {
		got[r.Test] = r
	}
	if r := got["TestLate"]; r.Seconds != 50 || r.Waited != 150.5 {
		t.Errorf("TestLate: %+v, want 50 s of its own after 150.5 s waited (a subtest's line is not the test's wait)", r)
	}
	if r := got["TestPlain"]; r.Seconds != 3 || r.Waited != 0 {
		t.Errorf("TestPlain: %+v", r)
	}
	if !strings.Contains(out.String(), "--- PASS: TestLate (50.0s) p") {
		t.Errorf("progress line: %q", out.String())
	}
	var text bytes.Buffer
	if err := NewReport(c.Summary(), nil, 1, 20).WriteText(&text, "m"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "     50.0    150.5  pass    TestLate") {
		t.Errorf("table:\n%s", text.String())
	}
}

// A failed test's last reports are repeated at the report's end, where a
// CI log's tail keeps them when its whole output is cut: what the test
// said (t.Log, t.Error), in order, each line cut short, the last twelve.
func TestReportEndsWithWhatFailedTestsSaid(t *testing.T) {
	c, _ := collect(t)
	var held []string
	for i := range 20 {
		held = append(held, fmt.Sprintf("    chaos_test.go:%d: run %d %s\n", 100+i, i, strings.Repeat("x", 10*i)))
	}
	held = append(held, "    chaos_test.go:200: "+strings.Repeat("long ", 200)+"\n", "not a report line\n")
	c.Feed(Event{Action: "output", Package: "example.com/sample/e", Test: "TestChaos", Output: strings.Join(held, "")})
	c.Feed(Event{Action: "fail", Package: "example.com/sample/e", Test: "TestChaos", Elapsed: 3})
	s := c.Summary()
	if len(s.Failures) != 2 || s.Failures[0].Test != "TestBroken" || s.Failures[1].Test != "TestChaos" {
		t.Fatalf("failures %+v", s.Failures)
	}
	if got := s.Failures[0].Reported; len(got) == 0 || got[0] != "a_test.go:22: evidence line" {
		t.Errorf("TestBroken reported %q", got)
	}
	got := s.Failures[1].Reported
	if len(got) != failureLines || !strings.HasPrefix(got[0], "chaos_test.go:109: run 9 ") || !strings.HasPrefix(got[len(got)-1], "chaos_test.go:200: long") || len(got[len(got)-1]) > failureLineBytes+len("…") {
		t.Errorf("TestChaos reported %d lines: %q", len(got), got)
	}
	var out bytes.Buffer
	if err := NewReport(s, nil, 1, 20).WriteText(&out, module); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	i := strings.LastIndex(text, "== FAILED TestChaos (e), its last reports:\n  chaos_test.go:109: run 9 ")
	if i < 0 || strings.Contains(text[i:], "== ") && strings.Count(text[i:], "== ") > 1 {
		t.Errorf("the report does not end with TestChaos's last reports:\n%s", text)
	}
}
