package watchdog

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The child half of TestAnInterruptTearsTheWorldDown: an armed watchdog
// whose teardown leaves a mark, then a test that would run for a minute.
func TestInterruptedChild(t *testing.T) {
	mark := os.Getenv("WATCHDOG_TEST_MARK")
	if mark == "" {
		t.Skip("run by TestAnInterruptTearsTheWorldDown")
	}
	stop := Start("kedge.dev/kedge/integration/watchdog", os.Stderr, func() {
		_ = os.WriteFile(mark, []byte("torn down"), 0o644)
	})
	defer stop()
	os.Stdout.WriteString("armed\n")
	time.Sleep(time.Minute)
}

// A test binary stopped by SIGINT (a Ctrl-C) or SIGTERM (a cancelled CI
// job) runs the world's teardown before it exits, names the test it
// stopped, and fails.
func TestAnInterruptTearsTheWorldDown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			mark := filepath.Join(t.TempDir(), "mark")
			cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptedChild$", "-test.v")
			cmd.Env = append(os.Environ(), "WATCHDOG_TEST_MARK="+mark)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill() }()
			lines := bufio.NewScanner(out)
			armed := false
			for !armed && lines.Scan() {
				armed = lines.Text() == "armed"
			}
			if !armed {
				t.Fatalf("the child never armed its watchdog: %s", stderr.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for lines.Scan() {
			}
			err = cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Errorf("the interrupted binary ended with %v, want exit status 1", err)
			}
			if b, err := os.ReadFile(mark); err != nil || string(b) != "torn down" {
				t.Errorf("no teardown: %q %v", b, err)
			}
			if !strings.Contains(stderr.String(), "watchdog: tests running: TestInterruptedChild") || !strings.Contains(stderr.String(), "watchdog: FAIL (interrupted)") {
				t.Errorf("stderr does not name the stopped test:\n%s", stderr.String())
			}
		})
	}
}
