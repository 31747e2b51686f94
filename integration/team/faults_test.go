package team

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"kedge.dev/kedge/integration/testhosts"
)

// Host faults for the chaos set. Each is undone by its mend and, should
// the test stop first, by a cleanup: no host stays frozen and no rule
// stays in the machine's iptables.

// hostProcs lists the machine PIDs of every process in the host's PID
// namespace (sshd, sessions, units, the kubelet).
func hostProcs(h *testhosts.Host) ([]int, error) {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", h.PID()))
	if err != nil {
		return nil, err
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		if l, err := os.Readlink(d + "/ns/pid"); err == nil && l == ns {
			pid, _ := strconv.Atoi(filepath.Base(d))
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// freeze stops every process of the host (SIGSTOP): a host that hangs,
// its TCP connections open and silent. The returned thaw continues them
// (also run at cleanup).
func freeze(t *testing.T, h *testhosts.Host) (thaw func() error) {
	t.Helper()
	signal := func(sig syscall.Signal) error {
		pids, err := hostProcs(h)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
		return nil
	}
	// Twice: a process forked while the first pass ran is caught by the
	// second.
	if err := signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze %s: %v", h.Name, err)
	}
	_ = signal(syscall.SIGSTOP)
	thawed := false
	thaw = func() error {
		if thawed {
			return nil
		}
		thawed = true
		return signal(syscall.SIGCONT)
	}
	t.Cleanup(func() { _ = thaw() })
	return thaw
}

// chaosChain is the iptables chain the network faults use: made, hooked
// into INPUT and emptied, unhooked and deleted by the fault itself.
const chaosChain = "KEDGE-CHAOS"

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// cutOff drops every packet to the host's address (its sshd): a host off
// the network, as Kedge's worker sees it. The returned reconnect removes
// the rule and the chain (also run at cleanup).
func cutOff(t *testing.T, h *testhosts.Host) (reconnect func() error) {
	t.Helper()
	if err := iptables("-N", chaosChain); err != nil {
		t.Fatalf("cut %s off: %v", h.Name, err)
	}
	done := false
	reconnect = func() error {
		if done {
			return nil
		}
		done = true
		return dropChaosChain()
	}
	t.Cleanup(func() {
		if err := reconnect(); err != nil {
			t.Errorf("restore iptables: %v", err)
		}
	})
	if err := iptables("-A", chaosChain, "-d", h.Address, "-p", "tcp", "-j", "DROP"); err != nil {
		t.Fatalf("cut %s off: %v", h.Name, err)
	}
	if err := iptables("-I", "INPUT", "-j", chaosChain); err != nil {
		t.Fatalf("cut %s off: %v", h.Name, err)
	}
	return reconnect
}

// dropChaosChain unhooks, empties and deletes the chain.
func dropChaosChain() error {
	var errs []string
	for _, args := range [][]string{{"-D", "INPUT", "-j", chaosChain}, {"-F", chaosChain}, {"-X", chaosChain}} {
		if err := iptables(args...); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// reboot reboots the host (testhosts' Reboot): every process of it ends,
// SSH sessions and the units' processes alike, then it boots with fresh
// /run and /tmp and its units start as at boot.
func reboot(t *testing.T, h *testhosts.Host) error {
	return h.Reboot(t.Context())
}
