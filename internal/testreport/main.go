package testreport

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Main is the testreport command: `run` runs a test command and reports,
// `show` prints the last report again. It returns the exit code: the test
// command's when it failed, 1 for a budget violation, 2 for bad usage.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: testreport run|show [flags]")
		return 2
	}
	fs := flag.NewFlagSet("testreport "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".test", "where the last run's event log and report are kept")
	output := fs.String("output", "text", "text or json")
	budget := fs.String("budget", "", "budget file (run)")
	top := fs.Int("top", 20, "how many of the slowest tests to list (run)")
	progress := fs.Duration("progress", 30*time.Second, "name each passing test that took at least this long as it ends (run)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "testreport: --output %q: want text or json\n", *output)
		return 2
	}
	module, err := modulePath("go.mod")
	if err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 2
	}
	switch args[0] {
	case "run":
		return run(fs.Args(), runOptions{dir: *dir, output: *output, budget: *budget, top: *top, progress: *progress, module: module}, stdout, stderr)
	case "show":
		return show(filepath.Join(*dir, "report.json"), *output, module, stdout, stderr)
	}
	fmt.Fprintf(stderr, "testreport: unknown command %q: want run or show\n", args[0])
	return 2
}

type runOptions struct {
	dir, output, budget, module string
	top                         int
	progress                    time.Duration
}

func run(command []string, o runOptions, stdout, stderr io.Writer) int {
	if len(command) == 0 {
		fmt.Fprintln(stderr, "testreport run: no test command after --")
		return 2
	}
	var budgets *Budgets
	if o.budget != "" {
		var err error
		if budgets, err = LoadBudgets(o.budget, o.module); err != nil {
			fmt.Fprintln(stderr, "testreport:", err)
			return 2
		}
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 2
	}
	log, err := os.Create(filepath.Join(o.dir, "go-test.json"))
	if err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 2
	}
	defer log.Close()

	before := calibrate()
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 2
	}
	echo := stdout
	if o.output == "json" {
		echo = stderr // stdout is the report alone
	}
	c := NewCollector(echo)
	c.Progress = o.progress
	readErr := c.Read(io.TeeReader(pipe, log))
	waitErr := cmd.Wait()
	after := calibrate()

	factor := 1.0
	if budgets != nil {
		factor = budgets.Factor(before, after)
	}
	rep := NewReport(c.Summary(), budgets, factor, o.top)
	rep.Calibration = []float64{before.Seconds(), after.Seconds()}
	if err := saveReport(filepath.Join(o.dir, "report.json"), rep); err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
	}
	if err := write(rep, o.output, o.module, stdout); err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(waitErr, &exit):
		return exit.ExitCode()
	case waitErr != nil || readErr != nil:
		fmt.Fprintln(stderr, "testreport:", errors.Join(waitErr, readErr))
		return 1
	case rep.Failed:
		return 1
	case len(rep.Violations) > 0:
		fmt.Fprintf(stderr, "testreport: %d tests past their time budget (%s)\n", len(rep.Violations), o.budget)
		return 1
	}
	return 0
}

func show(path, output, module string, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "testreport: %v (run `make test` first)\n", err)
		return 1
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		fmt.Fprintf(stderr, "testreport: %s: %v\n", path, err)
		return 1
	}
	if err := write(rep, output, module, stdout); err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 1
	}
	return 0
}

func write(rep Report, output, module string, w io.Writer) error {
	if output == "json" {
		return rep.WriteJSON(w)
	}
	return rep.WriteText(w, module)
}

func saveReport(path string, rep Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", fmt.Errorf("%w (run from the module's root)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// calibrate is Calibrate; tests of run replace it.
var calibrate = Calibrate
