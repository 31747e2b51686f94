package realnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// KubeletSysctls are the kernel settings a kubelet changes when it starts
// (its container manager sets them whatever its configuration, and with
// protectKernelDefaults it refuses to start instead): they are the whole
// machine's, not a namespace's. net.ipv4.ip_forward (the machine's
// network namespace) is held with them: Routed nodes set it.
var KubeletSysctls = []string{
	"net/ipv4/ip_forward",
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
