package gobin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"kedge.dev/kedge/integration/srcroot"
)

// Build builds the package pkg (an import path of Kedge's module) with
// env added to the environment, and returns the binary's path. Test
// packages build at once, as separate processes: one builds while the
// others wait, and find it up to date.
func Build(pkg string, env ...string) (string, error) {
	root, err := srcroot.Dir()
	if err != nil {
		return "", fmt.Errorf("gobin: the source tree: %w", err)
	}
	dir, err := Dir(root, env)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := Lock(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	bin := filepath.Join(dir, path.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// Dir is where Build puts the programs of the source tree at root built
// with env: each tree its own (two checkouts would otherwise overwrite
// each other's binaries under a running test), each environment its own.
func Dir(root string, env []string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	h := sha256.Sum256([]byte(root + "\x00" + strings.Join(env, "\x00")))
	return filepath.Join(cache, "kedge", "bin", hex.EncodeToString(h[:])[:16]), nil
}

// Lock takes an exclusive flock on path, waiting for any holder, and
// returns its release: test packages run as processes side by side.
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
