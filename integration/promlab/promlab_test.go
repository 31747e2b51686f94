package promlab

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestAlertFiresAndClears: a rule on a gauge the test flips fires within
// seconds and clears again, and Stop leaves no process behind.
func TestAlertFiresAndClears(t *testing.T) {
	ctx := context.Background()
	g := ServeGauges(t)
	g.Set("lab_broken", 0)
	s, err := Start(ctx, Options{Targets: []string{g.Target}, Rules: `groups:
  - name: lab
    rules:
      - alert: LabBroken
        expr: lab_broken > 0
        for: 0s
`})
	if err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	defer s.Stop()
	start := time.Now()
	g.Set("lab_broken", 1)
	if err := s.WaitFiring(ctx, 30*time.Second, "LabBroken"); err != nil {
		t.Fatal(err)
	}
	t.Logf("fired after %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	g.Set("lab_broken", 0)
	if err := s.WaitFiring(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("cleared after %s", time.Since(start).Round(time.Millisecond))
	s.Stop()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("prometheus (pid %d) still runs after Stop", pid)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("its directory %s is still there (%v)", s.dir, err)
	}
}
