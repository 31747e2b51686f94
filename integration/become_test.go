package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// startLabOf starts n more test hosts for one test, named names.
func startLabOf(t *testing.T, base string, o testhosts.Options) *testhosts.Lab {
	t.Helper()
	o.BaseIP, o.Dir = base, filepath.Join(t.TempDir(), "hosts")
	if o.Count == 0 {
		o.Count = len(o.Names)
	}
	l, err := testhosts.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func writeInventory(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A node whose sudo wants a password stops a kubelet swap at the
// preflight, once, with an error naming the host and the user: the node
// is never cordoned and nothing is written on it.
func TestSwapStopsBeforeCordonWhenSudoWantsAPassword(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	l := startLabOf(t, "127.0.27.", testhosts.Options{Names: []string{"controller-1", "pw-worker"}, SudoPassword: []string{"pw-worker"}})
	installKubelet(t, cp, l.Hosts[1], "pw-worker", "quay.io/poseidon/kubelet:v1.35.3")
	eventually(t, 60*time.Second, "pw-worker Ready", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), "pw-worker", metav1.GetOptions{})
		return err == nil && nodeIsReady(n)
	})
	t.Cleanup(func() {
		_, _ = l.Hosts[1].Exec(context.Background(), "systemctl", "stop", "kubelet")
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), "pw-worker", metav1.DeleteOptions{})
	})
	inv := writeInventory(t, strings.Replace(lab.Inventory("pw", l, l.KnownHostsFile), "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1))

	p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", inv,
		"--set", "node=pw-worker", "--set", "image=quay.io/poseidon/kubelet:v1.35.4", "--set", "readyTimeout=60s")
	if code == 0 {
		t.Fatalf("the swap succeeded on a host whose sudo wants a password: %s", errOut)
	}
	pre := step(t, p, "preflight")
	if pre.State != workflows.StateFailed || pre.Attempts != 1 {
		t.Errorf("preflight: state %s after %d attempts, want failed after 1 (not retried)", pre.State, pre.Attempts)
	}
	for _, want := range []string{"PrivilegeEscalationFailed", "pw-worker", "user core", "password is required"} {
		if !strings.Contains(pre.LastError, want) {
			t.Errorf("preflight error lacks %q: %s", want, pre.LastError)
		}
	}
	if c := step(t, p, "cordon"); c.Attempts != 0 || c.State == workflows.StateSucceeded {
		t.Errorf("cordon ran: %+v", c)
	}
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), "pw-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable {
		t.Error("pw-worker was cordoned")
	}
	if _, err := l.Hosts[1].ReadFile("/etc/systemd/system/kubelet.service.d/10-image.conf"); err == nil {
		t.Error("the image drop-in was written")
	}
}

// Root inventories keep working on hosts that allow root; a non-root login
// without become is refused by the preflight, saying what to set.
func TestRootInventoryAndMissingBecome(t *testing.T) {
	mainLane.join(t)
	l := startLabOf(t, "127.0.28.", testhosts.Options{Names: []string{"root-host"}, RootLogin: true})
	base := strings.Replace(lab.Inventory("rooted", l, l.KnownHostsFile), "controllers:\n", "workers:\n", 1)
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: as-root}
steps:
  - id: preflight
    action: host.preflight
    on: root-host
  - id: write
    needs: [preflight]
    action: host.write-file
    on: root-host
    with: {path: /etc/kedge-root/probe, content: "hello\n", mode: "0600"}
  - id: whoami
    needs: [write]
    action: host.run
    on: root-host
    with: {command: 'echo "$(id -un)/$SUDO_USER" > /var/lib/kedge-whoami'}
`)
	t.Run("root", func(t *testing.T) {
		inv := writeInventory(t, strings.Replace(base, "  user: core\n  become: sudo\n", "  user: root\n", 1))
		if _, code, errOut := runWaitInv(t, rb, inv); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if got, err := l.Hosts[0].ReadFile("/var/lib/kedge-whoami"); err != nil || string(got) != "root/\n" {
			t.Errorf("whoami = %q (%v)", got, err)
		}
	})
	t.Run("sudo", func(t *testing.T) {
		if _, code, errOut := runWaitInv(t, rb, writeInventory(t, base)); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if got, err := l.Hosts[0].ReadFile("/var/lib/kedge-whoami"); err != nil || string(got) != "root/core\n" {
			t.Errorf("whoami = %q (%v)", got, err)
		}
		out, err := l.Hosts[0].Exec(t.Context(), "stat", "-c", "%a %U %s", "/etc/kedge-root/probe")
		if err != nil || strings.TrimSpace(string(out)) != "600 root 6" {
			t.Errorf("probe file: %q (%v), want 600 root 6", out, err)
		}
	})
	t.Run("core without become", func(t *testing.T) {
		inv := writeInventory(t, strings.Replace(base, "  become: sudo\n", "", 1))
		p, code, _ := runWaitInv(t, rb, inv)
		pre := step(t, p, "preflight")
		if code == 0 || pre.Attempts != 1 || !strings.Contains(pre.LastError, "PrivilegeEscalationFailed") ||
			!strings.Contains(pre.LastError, "set ssh.become: sudo") {
			t.Errorf("exit %d, preflight %+v", code, pre)
		}
	})
}
