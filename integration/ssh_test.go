package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"kedge.dev/kedge/workflows"
)

const touchWorker1 = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: touch}
steps:
  - id: touch
    action: host.run
    on: worker-1
    retry: {maxAttempts: 3, initialInterval: 100ms}
    with: {command: "touch /var/lib/touched-by-a-stranger"}
`

func TestAuthFailureIsClassifiedAndNotRetried(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	stranger := filepath.Join(dir, "stranger")
	if err := os.WriteFile(stranger, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	inv := strings.Replace(labInventory(world.lab, world.lab.KnownHostsFile), world.lab.IdentityFile, stranger, 1)
	invFile := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(invFile, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := kedge(t, "run", writeRunbook(t, touchWorker1), "--inventory", invFile, "--wait", "-o", "json")
	if code == 0 || !strings.Contains(errOut, "AuthFailed") && !strings.Contains(errOut, "refused user core") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"attempts": 1,`) {
		t.Errorf("an authentication failure was retried: %s", out)
	}
	if hostFileExists(t, "worker-1", "/var/lib/touched-by-a-stranger") {
		t.Error("a stranger's key was let in")
	}
}

func TestUnreachableHostIsRetried(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	known, _ := os.ReadFile(world.lab.KnownHostsFile)
	known = append(known, []byte("127.0.20.250 "+labHost(t, "worker-1").HostKeyPublic+"\n")...)
	if err := os.WriteFile(kh, known, 0o644); err != nil {
		t.Fatal(err)
	}
	inv := labInventory(world.lab, kh) + "  - name: worker-gone\n    address: 127.0.20.250\n    port: 22\n"
	invFile := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(invFile, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	rb := writeRunbook(t, strings.ReplaceAll(touchWorker1, "on: worker-1", "on: worker-gone"))
	p, code, errOut := runWaitInv(t, rb, invFile)
	if code == 0 || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if s := step(t, p, "touch"); s.Attempts != 3 || s.State != workflows.StateFailed {
		t.Errorf("an unreachable host should be retried up to maxAttempts: %+v", s)
	}
}

func TestOneConnectionPerHostAndDeadOnesAreReplaced(t *testing.T) {
	mainLane.join(t)
	var sb strings.Builder
	sb.WriteString("apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: parallel-on-one-host}\nsteps:\n")
	for i := range 8 {
		fmt.Fprintf(&sb, "  - id: s%d\n    action: host.run\n    on: worker-2\n    with: {command: \"sleep 0.3; echo %d >> /var/lib/parallel\"}\n", i, i)
	}
	rb := writeRunbook(t, sb.String())
	if _, code, errOut := runWait(t, rb); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(readHostFile(t, "worker-2", "/var/lib/parallel"), "\n"); n != 8 {
		t.Errorf("%d of 8 steps ran", n)
	}
	addr := labHost(t, "worker-2").Address
	if n := establishedTo(t, addr); n != 1 {
		t.Errorf("%d SSH connections to worker-2 from this worker, want 1 shared", n)
	}

	// Kill the server side of the pooled connection: the next step must
	// redial transparently, without spending a retry.
	if _, err := labHost(t, "worker-2").Exec(t.Context(), "pkill", "-f", "sshd: core"); err != nil {
		t.Fatalf("pkill: %v", err)
	}
	one := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: after-drop}
steps:
  - id: again
    action: host.run
    on: worker-2
    retry: {maxAttempts: 1}
    with: {command: "echo again >> /var/lib/parallel"}
`)
	p, code, errOut := runWait(t, one)
	if code != 0 {
		t.Fatalf("step after a dropped connection failed: %s", errOut)
	}
	if s := step(t, p, "again"); s.Attempts != 1 {
		t.Errorf("attempts = %d", s.Attempts)
	}
}

// establishedTo counts this process's established TCP connections to
// addr:22, from /proc/net/tcp.
func establishedTo(t *testing.T, addr string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	var ip [4]byte
	fmt.Sscanf(addr, "%d.%d.%d.%d", &ip[0], &ip[1], &ip[2], &ip[3])
	want := fmt.Sprintf("%02X%02X%02X%02X:0016", ip[3], ip[2], ip[1], ip[0])
	inodes := socketInodes(t)
	n := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[2] == want && f[3] == "01" && inodes[f[9]] {
			n++
		}
	}
	return n
}

// socketInodes are the sockets this process holds open.
func socketInodes(t *testing.T) map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			out[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	return out
}
