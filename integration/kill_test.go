package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/runbooks/inventory"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
)

// directHost is the host.run activity on worker-2, called without
// Temporal, and the lab host behind it.
func directHost(t *testing.T) (*sshhost.Activities, target.SSH) {
	t.Helper()
	pool := sshpool.New(sshpool.Options{})
	t.Cleanup(func() { pool.Close() })
	cluster, err := inventory.LoadFile(world.inventory)
	if err != nil {
		t.Fatal(err)
	}
	target, err := cluster.Target("worker-2")
	if err != nil {
		t.Fatal(err)
	}
	return &sshhost.Activities{Pool: pool}, target
}

// remoteProcs lists the processes on worker-2 whose command line holds
// marker.
func remoteProcs(t *testing.T, marker string) string {
	t.Helper()
	out, err := labHost(t, "worker-2").Exec(t.Context(), "sh", "-c", "ps -eo pid,pgid,args | grep '"+marker+"' | grep -v grep || true")
	if err != nil {
		t.Fatalf("ps on worker-2: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// OpenSSH's sshd refuses "signal" requests on many builds, so stopping a
// command cannot rely on them: a timeout must still stop every process
// the command started, background ones included.
//
// The command obeys SIGTERM: it is stopped by it, not by the SIGKILL
// that follows after the grace period. Its TERM trap says so on the host
// (a wall-clock bound said the same until a busy machine took 6 s to
// connect, run and return). A timeout that fires before the command has
// set its trap (it says when it has) proves nothing: the run is made
// again with a longer one.
func TestTimeoutKillsTheWholeRemoteCommand(t *testing.T) {
	mainLane.join(t)
	acts, target := directHost(t)
	const marker, ready = "/tmp/kedge-kill-test-term", "/tmp/kedge-kill-test-ready"
	w := labHost(t, "worker-2")
	for _, timeout := range []string{"500ms", "2s", "8s"} {
		if out, err := w.Exec(t.Context(), "rm", "-f", marker, ready); err != nil {
			t.Fatalf("worker-2: %v: %s", err, out)
		}
		_, err := acts.Run(t.Context(), host.RunInput{Target: target, Timeout: timeout,
			Command: "trap 'echo TERM > " + marker + "; exit 143' TERM; echo > " + ready + "; sleep 4101 & sleep 4102 & wait"})
		if err == nil || !strings.Contains(err.Error(), "CommandTimeout") {
			t.Fatalf("want a CommandTimeout error, got %v", err)
		}
		waitGone(t, "sleep 410[12]", 3*time.Second)
		if _, err := w.ReadFile(ready); err != nil {
			t.Logf("the %s timeout fired before the command set its trap: again, longer", timeout)
			continue
		}
		if got, err := w.ReadFile(marker); err != nil || strings.TrimSpace(string(got)) != "TERM" {
			t.Errorf("the command was not stopped by SIGTERM (its trap wrote %q, %v): by the SIGKILL after the grace period?", got, err)
		}
		return
	}
	t.Fatal("the command never set its trap before its timeout, even in 8s")
}

func TestCancelKillsACommandThatIgnoresSIGTERM(t *testing.T) {
	mainLane.join(t)
	acts, target := directHost(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := acts.Run(ctx, host.RunInput{Target: target, Command: "trap '' TERM; sleep 4103"})
	if err == nil {
		t.Fatal("a cancelled run returned no error")
	}
	// SIGKILL follows SIGTERM after the grace period.
	waitGone(t, "sleep 4103", 10*time.Second)
}

func waitGone(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := remoteProcs(t, marker)
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running on worker-2 after %s:\n%s", within, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
