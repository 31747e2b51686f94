package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// localBackupsInventory is base with one backup destination, local, a
// directory on the worker (returned).
func localBackupsInventory(t *testing.T, base string) (inv, local string) {
	t.Helper()
	dir := t.TempDir()
	local = filepath.Join(dir, "backups")
	inv = filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, append(must(os.ReadFile(base)), fmt.Sprintf("backups:\n  local: {kind: local, path: %s}\n", local)...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { workerServes(base) })
	return inv, local
}

// waitForGate waits until the run waits at the approval step gate; a
// step that fails first fails the test.
func waitForGate(t *testing.T, id, gate string, within time.Duration) workflows.StepProgress {
	t.Helper()
	var at workflows.StepProgress
	eventually(t, within, id+" to wait at "+gate, func() bool {
		pr, err := queryProgress(id)
		if err != nil {
			return false
		}
		for _, s := range pr.Steps {
			if s.State == workflows.StateFailed {
				t.Fatalf("%s: step %s failed: %s\n%+v", id, s.ID, s.LastError, pr)
			}
			if s.ID == gate && s.State == workflows.StateWaiting {
				at = s
				return true
			}
		}
		return false
	})
	return at
}

// restoreCase is a world etcd-restore runs on: its inventory (with a
// local backup destination), its API, its three controllers (the first
// survives), how to list etcd's members through one, and the command that
// kills a member and deletes its data directory.
type restoreCase struct {
	inv         string
	client      kubernetes.Interface
	controllers []*testhosts.Host
	members     func(t *testing.T, via *testhosts.Host) []string
	kill        string
}

// hostPath is path inside the host h, read from the machine.
func hostPath(h *testhosts.Host, path string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", h.PID()), path)
}

// TestEtcdRestoreOnTyphoonCluster restores the Typhoon world's etcd from
// a snapshot after it lost its quorum (restoreAfterQuorumLost), its
// members stopped with their units.
func TestEtcdRestoreOnTyphoonCluster(t *testing.T) {
	typhoonDRLane.join(t)
	w := typhoonDRWorld(t, "typhoon-restore")
	inv, _ := localBackupsInventory(t, w.inventory)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range []string{"tyc1", "tyc2"} {
				b, _ := w.host(t, h).ReadFile("/var/log/units/etcd-member.service.log")
				t.Logf("%s etcd-member.service log tail:\n%s", h, tail(string(b), 3000))
			}
		}
	})
	restoreAfterQuorumLost(t, restoreCase{inv: inv, client: w.client,
		controllers: []*testhosts.Host{w.host(t, "tyc1"), w.host(t, "tyc2"), w.host(t, "tyc3")},
		members:     func(t *testing.T, via *testhosts.Host) []string { return w.etcdMembersVia(t, via.Name) },
		kill:        "systemctl stop etcd-member.service && rm -rf /var/lib/etcd"})
}

// TestEtcdRestoreOnKedgeLayout restores etcd of Kedge's layout (static
// pods on three controllers) after it lost its quorum
// (restoreAfterQuorumLost): two members' etcd killed and their data
// deleted; the kubelet starts them again, and they refuse to bootstrap a
// member the survivor knows.
func TestEtcdRestoreOnKedgeLayout(t *testing.T) {
	kedgeHALane.join(t)
	w := kedgeHAWorld(t)
	inv, _ := localBackupsInventory(t, w.inventory)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range w.controllers {
				logs, _ := filepath.Glob(hostPath(h, "var/log/pods/*etcd*/etcd.log"))
				for _, l := range logs {
					b, _ := os.ReadFile(l)
					t.Logf("%s %s tail:\n%s", h.Name, filepath.Base(filepath.Dir(l)), tail(string(b), 3000))
				}
			}
		}
	})
	restoreAfterQuorumLost(t, restoreCase{inv: inv, client: w.client, controllers: w.controllers,
		members: func(t *testing.T, via *testhosts.Host) []string { return memberNames(w.members(t, via)) },
		kill:    "kill -9 $(pgrep -x etcd) && rm -rf /var/lib/etcd"})
}

// restoreAfterQuorumLost restores a world's etcd from a snapshot after
// it lost its quorum. A Secret is written, a snapshot taken into the
// worker's directory, a second Secret written after it. While every
// member is healthy, etcd-restore is refused before anything changes.
// Then two of the three members are killed and their data directories
// deleted; etcd-restore, on a worker of its own, waits at its gate
// showing the snapshot's age and revision; approved, it stops the API
// servers and etcd, and while it restores the members' data that worker
// is killed and a new one started, which finishes the job. etcd ends
// with three healthy members, the API answers, holds the first Secret
// and not the second, every Node is Ready, and the survivor's old data
// directory is kept beside the new one.
func restoreAfterQuorumLost(t *testing.T, c restoreCase) {
	ctx := t.Context()
	// A queue of this test's own: the Kedge HA and Typhoon DR lanes
	// restore side by side, each with a worker that serves only its
	// world.
	queue := "etcd-restore-" + strings.ToLower(t.Name())
	var names []string
	for _, h := range c.controllers {
		names = append(names, h.Name)
	}
	before := writeSecret(t, c.client, "restore-before")
	began := time.Now()
	if p, code, errOut := runWaitInv(t, "etcd-snapshot", c.inv, "--set", "destination=local"); code != 0 {
		t.Fatalf("etcd-snapshot: exit %d: %s\n%+v", code, errOut, p)
	}
	t.Logf("etcd-snapshot: %s", time.Since(began).Round(time.Millisecond))
	writeSecret(t, c.client, "restore-after")

	// The workers' $TMPDIR is the test's: what a killed one leaves there
	// is seen.
	workerTmp := t.TempDir()
	workerEnv := []string{"TMPDIR=" + workerTmp}
	worker := startWorkerEnv(t, queue, workerEnv, c.inv)
	dataDirs := func(t *testing.T, what string) {
		t.Helper()
		for _, h := range c.controllers {
			if _, err := os.Stat(hostPath(h, "var/lib/etcd/member")); err != nil {
				t.Errorf("%s: %s's /var/lib/etcd/member: %v", what, h.Name, err)
			}
		}
	}

	// Every member healthy: refused before anything changes.
	began = time.Now()
	p, code, errOut := runWaitInv(t, "etcd-restore", c.inv, "--set", "destination=local", "--task-queue", queue)
	t.Logf("etcd-restore with every member healthy, refused: %s", time.Since(began).Round(time.Millisecond))
	if st := step(t, p, "quorum-lost"); code == 0 || st.State != workflows.StateFailed || st.Attempts != 1 ||
		!strings.Contains(st.LastError, "a restore while a majority is healthy") || !strings.Contains(st.LastError, "3 of etcd's 3 members answer healthy") {
		t.Fatalf("etcd-restore of a healthy etcd: exit %d, quorum-lost %+v: %s", code, st, errOut)
	}
	if st := step(t, p, "stop"); st.State == workflows.StateSucceeded || st.Attempts != 0 {
		t.Errorf("refused, yet the control plane was stopped: %+v", st)
	}
	if got := c.members(t, c.controllers[0]); !slices.Equal(got, names) {
		t.Errorf("after the refusal: etcd members %v", got)
	}
	dataDirs(t, "after the refusal")

	// Two of three members gone with their data.
	for _, h := range c.controllers[1:] {
		if out, err := h.Exec(ctx, "sh", "-c", c.kill); err != nil {
			t.Fatalf("kill etcd on %s: %v: %s", h.Name, err, out)
		}
	}
	eventually(t, 2*time.Minute, "the API to fail without etcd's quorum", func() bool {
		_, err := c.client.CoreV1().Secrets("default").Get(ctx, before.Name, metav1.GetOptions{})
		return err != nil
	})

	began = time.Now()
	id := startRunInv(t, "etcd-restore", c.inv, "--set", "destination=local", "--task-queue", queue)
	gate := waitForGate(t, id, "approve", 10*time.Minute)
	toGate := time.Since(began)
	if !strings.Contains(gate.Prompt, "at revision ") || !strings.Contains(gate.Prompt, " ago)") || !strings.Contains(gate.Prompt, "Everything written to the cluster since then is lost") ||
		!strings.Contains(gate.Prompt, " of 3 members (a quorum is 2)") {
		t.Errorf("the gate's prompt: %q", gate.Prompt)
	}
	t.Logf("etcd-restore at its gate: %s; prompt: %s", toGate.Round(time.Millisecond), gate.Prompt)
	if out, errOut, code := kedge(t, "approve", id, "--by", "sre-on-call", "--output", "json"); code != 0 {
		t.Fatalf("kedge approve: exit %d: %s %s", code, out, errOut)
	}
	approved := time.Now()

	// The worker dies while a member's restored data directory is being
	// shipped; a new one finishes the restore.
	eventually(t, 5*time.Minute, "a member's restored data being shipped", func() bool {
		for _, h := range c.controllers {
			if m, _ := filepath.Glob(hostPath(h, "var/lib/etcd.restoring-*/member")); len(m) > 0 {
				return true
			}
		}
		return false
	})
	if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	killedAt := time.Since(approved)
	startWorkerEnv(t, queue, workerEnv, c.inv)

	if err := waitClosed(t, id, 20*time.Minute); err != nil {
		pr, _ := queryProgress(id)
		t.Fatalf("etcd-restore: %v\n%+v", err, pr)
	}
	total := time.Since(began)
	pr, _ := queryProgress(id)
	if pr.State != workflows.StateSucceeded {
		t.Fatalf("etcd-restore: %s: %s\n%+v", pr.State, pr.Error, pr)
	}
	var times []string
	for _, s := range pr.Steps {
		if s.StartedAt != nil && s.EndedAt != nil {
			times = append(times, fmt.Sprintf("%s %s (%d attempts)", s.ID, s.EndedAt.Sub(*s.StartedAt).Round(time.Millisecond), s.Attempts))
		}
	}
	t.Logf("etcd-restore on 3 controllers, the worker killed %s after the approval: %s in all, %s after the approval; %s",
		killedAt.Round(time.Millisecond), total.Round(time.Second), time.Since(approved).Round(time.Second), strings.Join(times, ", "))
	if st := step(t, pr, "restore"); st.Attempts < 2 {
		t.Errorf("the restore step ran %d attempts: the killed worker's was not retried", st.Attempts)
	}
	// The killed worker's directory (a member's data in clear) is gone.
	if left, _ := filepath.Glob(filepath.Join(workerTmp, "kedge-etcd-*")); len(left) > 0 {
		t.Errorf("left on the worker after the restore: %v", left)
	}

	for _, h := range c.controllers {
		if got := c.members(t, h); !slices.Equal(got, names) {
			t.Errorf("etcd members through %s: %v", h.Name, got)
		}
	}
	dataDirs(t, "after the restore")
	if kept, _ := filepath.Glob(hostPath(c.controllers[0], "var/lib/etcd.before-*/member")); len(kept) != 1 {
		t.Errorf("%s's old data directory is not kept: %v", names[0], kept)
	}
	secrets := c.client.CoreV1().Secrets("default")
	if _, err := secrets.Get(ctx, before.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Secret written before the snapshot: %v", err)
	}
	if _, err := secrets.Get(ctx, "restore-after", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret written after the snapshot: %v, want it gone", err)
	}
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				t.Errorf("Node %s: Ready %s (%s)", n.Name, cond.Status, cond.Reason)
			}
		}
	}
	// The API and etcd take writes again.
	writeSecret(t, c.client, "restore-later")
}
