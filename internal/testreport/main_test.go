package testreport

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run's exit code: the test command's when it fails, 1 when it passed but
// a test ran past its budget, 0 otherwise; the report is kept for show.
func TestRunExitCodesAndShow(t *testing.T) {
	dir := t.TempDir()
	gomod := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(gomod, []byte("module example.com/sample\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	passing := filepath.Join(dir, "pass.jsonl")
	events := `{"Time":"2026-12-01T22:52:01Z","Action":"run","Package":"example.com/sample/b","Test":"TestLong"}
{"Time":"2026-12-01T22:53:41Z","Action":"pass","Package":"example.com/sample/b","Test":"TestLong","Elapsed":100}
{"Time":"2026-12-01T22:53:41Z","Action":"output","Package":"example.com/sample/b","Output":"ok  \texample.com/sample/b\t100.1s\n"}
{"Time":"2026-12-01T22:53:41Z","Action":"pass","Package":"example.com/sample/b","Elapsed":100.1}
`
	if err := os.WriteFile(passing, []byte(events), 0o644); err != nil {
		t.Fatal(err)
	}
	budget := filepath.Join(dir, "budget.txt")
	write := func(body string) {
		if err := os.WriteFile(budget, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	abs, err := filepath.Abs("testdata/run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	calibrate = func() time.Duration { return time.Second }
	t.Cleanup(func() { calibrate = Calibrate })
	t.Chdir(dir)
	report := filepath.Join(dir, "out")
	main := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(args, &out, &errb)
		return code, out.String(), errb.String()
	}

	write("machine 2s\n") // a slower reference: this machine's factor is 1
	if code, out, _ := main("run", "--dir", report, "--budget", budget, "--", "cat", passing); code != 1 || !strings.Contains(out, "BUDGET: TestLong (b) took 100.0s") {
		t.Errorf("unlisted 100 s test: exit %d\n%s", code, out)
	}
	write("machine 1h\nb TestLong 2m waits for a certificate to expire\n")
	if code, out, _ := main("run", "--dir", report, "--budget", budget, "--", "cat", passing); code != 0 || !strings.Contains(out, "ok  \texample.com/sample/b") {
		t.Errorf("listed: exit %d\n%s", code, out)
	}
	if code, out, _ := main("run", "--dir", report, "--budget", budget, "--", "cat", abs); code != 1 || !strings.Contains(out, "FAIL\texample.com/sample/a") {
		t.Errorf("a failing run read whole: exit %d\n%s", code, out)
	}
	if code, _, _ := main("run", "--dir", report, "--", "sh", "-c", "exit 3"); code != 3 {
		t.Errorf("the test command's exit 3 became %d", code)
	}
	write("machine 1h\nb TestLong 2m\n")
	if code, _, errOut := main("run", "--dir", report, "--budget", budget, "--", "cat", passing); code != 2 || !strings.Contains(errOut, "budget.txt:2: reason:") {
		t.Errorf("bad budget file: exit %d, %s", code, errOut)
	}

	main("run", "--dir", report, "--", "cat", abs)
	code, out, _ := main("show", "--dir", report, "--output", "json")
	var rep Report
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Slowest) == 0 || rep.Slowest[0].Test != "TestSlow" {
		t.Errorf("show --output json: exit %d\n%s", code, out)
	}
}
