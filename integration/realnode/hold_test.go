package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Two processes run real nodes at once: the first saves the machine's
// sysctls, the second's end leaves them as the first's nodes need them,
// the last one's end restores what the first saved; what a holder that
// died without letting go (a panicked test binary) left changed is put
// back before the next holder saves.
func TestSysctlsHeldAcrossProcesses(t *testing.T) {
	root := t.TempDir()
	oldSys, oldDir := procSys, HoldDir
	procSys, HoldDir = filepath.Join(root, "sys"), filepath.Join(root, "hold")
	t.Cleanup(func() { procSys, HoldDir = oldSys, oldDir })
	conntrack := filepath.Join(procSys, "net/netfilter/nf_conntrack_max")
	set := func(v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(conntrack), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(conntrack, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	get := func() string {
		b, _ := os.ReadFile(conntrack)
		return strings.TrimSpace(string(b))
	}
	// A process that has ended: its registration is stale.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	self, other := os.Getpid(), os.Getppid()

	set("262144")
	if err := machineHold(dead.Process.Pid); err != nil {
		t.Fatal(err)
	}
	set("65536") // the dead holder's nodes changed it, and it never let go
	if err := machineHold(self); err != nil {
		t.Fatal(err)
	}
	set("131072") // this process's nodes set it for kube-proxy
	if err := machineHold(other); err != nil {
		t.Fatal(err)
	}
	if err := machineRelease(self); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != "131072" {
		t.Errorf("nf_conntrack_max = %s after one of two holders let go, want 131072 (the other's nodes run)", got)
	}
	if err := machineRelease(other); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != "262144" {
		t.Errorf("nf_conntrack_max = %s after the last holder let go, want 262144 (saved by the first live holder)", got)
	}
}
