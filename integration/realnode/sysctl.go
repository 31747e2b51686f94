package realnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
// KubeletSysctls: the first saves them, the last to close restores them.
var sysctls struct {
	sync.Mutex
	users int
	saved map[string]string
}

// ReadSysctls reads KubeletSysctls.
func ReadSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, k := range KubeletSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
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
		saved, err := ReadSysctls()
		if err != nil {
			return fmt.Errorf("save sysctls: %w", err)
		}
		sysctls.saved = saved
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
	var errs []error
	for _, k := range KubeletSysctls {
		v, ok := sysctls.saved[k]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", strings.ReplaceAll(k, "/", "."), v, err))
		}
	}
	sysctls.saved = nil
	return errors.Join(errs...)
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
	p := "/proc/sys/net/netfilter/nf_conntrack_max"
	if err := os.WriteFile(p, []byte(strconv.Itoa(KubeProxyConntrackMax())+"\n"), 0o644); err != nil {
		return fmt.Errorf("net.netfilter.nf_conntrack_max for kube-proxy: %w", err)
	}
	return nil
}
