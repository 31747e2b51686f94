package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	hostacts "kedge.dev/kedge/activities/host"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/runbooks/inventory"
)

// directHost is the host.run activity on worker-2, called without
// Temporal, and the lab host behind it.
func directHost(t *testing.T) (*hostacts.Activities, sshpool.Target) {
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
	return &hostacts.Activities{Pool: pool}, target
}

// remoteProcs lists the processes on worker-2 whose command line holds
// marker.
func remoteProcs(t *testing.T, marker string) string {
	t.Helper()
	out, err := host(t, "worker-2").Exec(t.Context(), "sh", "-c", "ps -eo pid,pgid,args | grep '"+marker+"' | grep -v grep || true")
	if err != nil {
		t.Fatalf("ps on worker-2: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// OpenSSH's sshd refuses "signal" requests on many builds, so stopping a
// command cannot rely on them: a timeout must still stop every process
// the command started, background ones included.
func TestTimeoutKillsTheWholeRemoteCommand(t *testing.T) {
	mainLane.join(t)
	acts, target := directHost(t)
	start := time.Now()
	_, err := acts.Run(t.Context(), hostacts.RunInput{Target: target, Timeout: "500ms",
		Command: "sleep 4101 & sleep 4102; wait"})
	if err == nil || !strings.Contains(err.Error(), "CommandTimeout") {
		t.Fatalf("want a CommandTimeout error, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a command that obeys SIGTERM took %s to stop", d)
	}
	waitGone(t, "sleep 410[12]", 3*time.Second)
}

func TestCancelKillsACommandThatIgnoresSIGTERM(t *testing.T) {
	mainLane.join(t)
	acts, target := directHost(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := acts.Run(ctx, hostacts.RunInput{Target: target, Command: "trap '' TERM; sleep 4103"})
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
