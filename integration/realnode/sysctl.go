package realnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// KubeletSysctls are the kernel settings a kubelet changes when it starts
// (its container manager sets them whatever its configuration, and with
// protectKernelDefaults it refuses to start instead): they are the whole
// machine's, not a namespace's. Held with them: net.ipv4.ip_forward (the
// machine's network namespace), which Routed nodes set, and
// net.netfilter.nf_conntrack_max, which kube-proxy sets on its node and
// cannot from a node's network namespace (KubeProxy nodes set it for it).
var KubeletSysctls = []string{
	"net/ipv4/ip_forward",
	"net/netfilter/nf_conntrack_max",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// sysctls counts the nodes of this process whose kubelet may have changed
// KubeletSysctls: the first registers the process with the machine's
// holders (machineHold), the last to close deregisters it.
var sysctls struct {
	sync.Mutex
	users int
}

// procSys is where the sysctls are read and written (a test's directory
// in unit tests).
var procSys = "/proc/sys"

// ReadSysctls reads KubeletSysctls.
func ReadSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, k := range KubeletSysctls {
		b, err := os.ReadFile(filepath.Join(procSys, k))
		if os.IsNotExist(err) {
			continue // nf_conntrack not loaded: nothing to hold
		}
		if err != nil {
			return nil, err
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out, nil
}

func holdSysctls() error {
	sysctls.Lock()
	defer sysctls.Unlock()
	if sysctls.users == 0 {
		if err := machineHold(os.Getpid()); err != nil {
			return err
		}
	}
	sysctls.users++
	return nil
}

func releaseSysctls() error {
	sysctls.Lock()
	defer sysctls.Unlock()
	sysctls.users--
	if sysctls.users > 0 {
		return nil
	}
	return machineRelease(os.Getpid())
}

// The machine's holders: test processes run real nodes side by side (go
// test runs packages at once: integration/realnode beside integration),
// and the sysctls are the machine's. The first process to hold them saves
// them, the last to let go restores them; one that left without letting
// go (killed) no longer counts. What they share lives in HoldDir, behind
// an flock of its lock file.
var HoldDir = filepath.Join(os.TempDir(), "kedge-realnode-sysctls")

// machineHold registers pid as a holder, saving the sysctls first when no
// live process holds them. A holder that died holding them (a test
// binary that panicked) left them as its nodes set them: what it saved
// is put back first.
func machineHold(pid int) error {
	return underHoldLock(func() error {
		if live, died := liveHolders(pid); len(live) == 0 {
			if died {
				if err := restoreSaved(); err != nil {
					return err
				}
			}
			saved, err := ReadSysctls()
			if err != nil {
				return fmt.Errorf("save sysctls: %w", err)
			}
			var b strings.Builder
			for _, k := range KubeletSysctls {
				if v, ok := saved[k]; ok {
					fmt.Fprintf(&b, "%s %s\n", k, v)
				}
			}
			if err := os.WriteFile(filepath.Join(HoldDir, "saved"), []byte(b.String()), 0o600); err != nil {
				return fmt.Errorf("save sysctls: %w", err)
			}
		}
		return os.WriteFile(filepath.Join(HoldDir, "holder-"+strconv.Itoa(pid)), nil, 0o600)
	})
}

// machineRelease deregisters pid, restoring the saved sysctls when no
// other live process holds them.
func machineRelease(pid int) error {
	return underHoldLock(func() error {
		if err := os.Remove(filepath.Join(HoldDir, "holder-"+strconv.Itoa(pid))); err != nil && !os.IsNotExist(err) {
			return err
		}
		if live, _ := liveHolders(pid); len(live) > 0 {
			return nil
		}
		return restoreSaved()
	})
}

// restoreSaved writes back the sysctls the first holder saved.
func restoreSaved() error {
	b, err := os.ReadFile(filepath.Join(HoldDir, "saved"))
	if err != nil {
		return fmt.Errorf("restore sysctls: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok || !slices.Contains(KubeletSysctls, k) {
			continue
		}
		if err := os.WriteFile(filepath.Join(procSys, k), []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", strings.ReplaceAll(k, "/", "."), v, err))
		}
	}
	return errors.Join(errs...)
}

// liveHolders are the registered processes other than self still alive,
// and whether any registered one died; the registrations of dead ones are
// removed.
func liveHolders(self int) (live []int, died bool) {
	files, _ := filepath.Glob(filepath.Join(HoldDir, "holder-*"))
	for _, f := range files {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(f), "holder-"))
		if err != nil || pid == self {
			continue
		}
		if syscall.Kill(pid, 0) == nil || errors.Is(syscall.Kill(pid, 0), syscall.EPERM) {
			live = append(live, pid)
			continue
		}
		_ = os.Remove(f)
		died = true
	}
	return live, died
}

// machineOriginal is what the last holder to let go restored (or will),
// nil when no process ever held the sysctls on this machine, and the
// processes other than this one that hold them now.
func machineOriginal() (map[string]string, []int, error) {
	saved := map[string]string{}
	var others []int
	err := underHoldLock(func() error {
		others, _ = liveHolders(os.Getpid())
		b, err := os.ReadFile(filepath.Join(HoldDir, "saved"))
		if os.IsNotExist(err) {
			saved = nil // never held on this machine: nothing saved, nothing to restore
			return nil
		}
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				saved[k] = v
			}
		}
		return nil
	})
	return saved, others, err
}

func underHoldLock(f func() error) error {
	if err := os.MkdirAll(HoldDir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(HoldDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	return f()
}

// KubeProxyConntrackMax is the nf_conntrack_max kube-proxy v1.35 sets with
// its defaults (32768 per CPU, at least 131072): it writes the sysctl
// whenever the value differs, which a process outside the machine's
// network namespace may not.
func KubeProxyConntrackMax() int {
	return max(32768*runtime.NumCPU(), 131072)
}

// holdConntrackForKubeProxy sets the machine's nf_conntrack_max to
// KubeProxyConntrackMax (the sysctls are held: restored when the last node
// closes), so kube-proxy finds it set.
func holdConntrackForKubeProxy() error {
	p := filepath.Join(procSys, "net/netfilter/nf_conntrack_max")
	if err := os.WriteFile(p, []byte(strconv.Itoa(KubeProxyConntrackMax())+"\n"), 0o644); err != nil {
		return fmt.Errorf("net.netfilter.nf_conntrack_max for kube-proxy: %w", err)
	}
	return nil
}
