package testhosts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"kedge.dev/kedge/integration/gobin"
	"kedge.dev/kedge/integration/srcroot"
)

// The stand-in programs installed on every host, by file name, and the
// package each is built from.
var standinPackages = map[string]string{
	"systemctl":   "systemctl",
	"journalctl":  "systemctl",
	"docker":      "docker",
	"podman":      "docker",
	"kubelet-sim": "kubelet",
	// containerd's CLI, for the kubelet's images (namespace k8s.io); not
	// on hosts with a real containerd (Options.RealContainerd).
	"ctr": "ctr",
	// The hosts share the machine's kernel: these check and record on the
	// host what the real ones would change in the kernel.
	"modprobe": "modprobe",
	"sysctl":   "sysctl",
	// reboot and shutdown are systemctl's, as on a systemd host.
	"reboot":   "systemctl",
	"shutdown": "systemctl",
	// The OS families' update tools (osTools): only a host of the
	// family gets its tool, at its real path (/usr/bin).
	"rpm-ostree":           "rpmostree",
	"update_engine_client": "updateengine",
	"apt-get":              "apt",
	"apt-mark":             "apt",
}

var (
	buildOnce sync.Once
	built     map[string]string
	buildErr  error
)

// standins builds the stand-in programs once per process, into a cache
// directory keyed by a hash of their source, and returns their paths.
func standins() (map[string]string, error) {
	buildOnce.Do(func() { built, buildErr = buildStandins() })
	return built, buildErr
}

func buildStandins() (map[string]string, error) {
	root, err := srcroot.Dir()
	if err != nil {
		return nil, fmt.Errorf("testhosts: the stand-ins' source: %w", err)
	}
	src := filepath.Join(root, "integration", "testhosts", "standins")
	h := sha256.New()
	files, _ := filepath.Glob(filepath.Join(src, "*", "*.go"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s\n%d\n", filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), len(data))
		h.Write(data)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "kedge", "standins", hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	// Test packages run as separate processes, several at once: one builds
	// while the others wait, and each binary appears whole (renamed from a
	// name private to this process).
	unlock, err := gobin.Lock(filepath.Join(out, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	paths := map[string]string{}
	for name, pkg := range standinPackages {
		bin := filepath.Join(out, pkg)
		paths[name] = bin
		if _, err := os.Stat(bin); err == nil {
			continue
		}
		tmp := fmt.Sprintf("%s.tmp.%d", bin, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "./"+pkg)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("build stand-in %s: %w\n%s", pkg, err, b)
		}
		if err := os.Rename(tmp, bin); err != nil {
			return nil, err
		}
	}
	return paths, nil
}
