package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// userland is what stands for the image's own files: the host's, read-only.
var userland = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hidden are paths of the host's userland that are the host's, not an
// image's: a container sees them only through a volume.
var hidden = []string{"/lib/modules", "/usr/lib/modules"}

// etcFiles are copied from the host into the container's /etc, as an image
// or the runtime would provide them.
var etcFiles = []string{"passwd", "group", "nsswitch.conf", "hosts", "resolv.conf"}

// initContainer runs in the container's new mount and UTS namespaces: it
// builds the container's root, enters it and execs the process. A failure
// before the exec is written to fd 3 (the status pipe), which a successful
// exec closes.
func initContainer(id string) int {
	status := os.NewFile(3, "status")
	syscall.CloseOnExec(3)
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(status, format+"\n", args...)
		return code
	}
	c, err := loadContainer(id)
	if err != nil {
		return fail(125, "container %s: %v", id, err)
	}
	root := c.file("rootfs")
	if err := buildRoot(c, root); err != nil {
		return fail(125, "%s: Error response from daemon: failed to create task for container: %v", prog, err)
	}
	if err := enterRoot(root); err != nil {
		return fail(125, "%s: Error response from daemon: failed to create task for container: %v", prog, err)
	}
	// The root's own mount point, seen again through a volume of /run,
	// is not the container's business.
	_ = syscall.Unmount(root, syscall.MNT_DETACH)
	if h, _ := os.Hostname(); c.Hostname != "" && c.Hostname != h {
		if err := syscall.Sethostname([]byte(c.Hostname)); err != nil {
			return fail(125, "sethostname: %v", err)
		}
	}
	for _, u := range c.Ulimits {
		if err := syscall.Setrlimit(ulimitNames[u.Name], &syscall.Rlimit{Cur: u.Soft, Max: u.Hard}); err != nil {
			return fail(125, "%s: Error response from daemon: failed to set ulimit %s: %v", prog, u.Name, err)
		}
	}
	if c.WorkDir != "" {
		_ = os.MkdirAll(c.WorkDir, 0o755)
		if err := os.Chdir(c.WorkDir); err != nil {
			return fail(126, "%s: Error response from daemon: chdir to cwd (%q) set in config.json failed: %v", prog, c.WorkDir, err)
		}
	}
	if c.User != "" && c.User != "root" {
		uid, gid, _ := strings.Cut(c.User, ":")
		u, _ := strconv.Atoi(uid)
		g, _ := strconv.Atoi(gid)
		if err := syscall.Setgroups(nil); err != nil {
			return fail(125, "setgroups: %v", err)
		}
		if err := syscall.Setgid(g); err != nil {
			return fail(125, "setgid: %v", err)
		}
		if err := syscall.Setuid(u); err != nil {
			return fail(125, "setuid: %v", err)
		}
	}
	if len(c.Argv) == 0 {
		return fail(125, "%s: Error response from daemon: no command specified", prog)
	}
	for _, kv := range c.Env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", p)
		}
	}
	path, err := exec.LookPath(c.Argv[0])
	if err != nil {
		return fail(127, "%s: Error response from daemon: failed to create task for container: exec: %q: executable file not found in $PATH: unknown.", prog, c.Argv[0])
	}
	err = syscall.Exec(path, c.Argv, c.Env)
	return fail(126, "%s: Error response from daemon: failed to create task for container: exec %s: %v: unknown.", prog, path, err)
}

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := syscall.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", src, dst, err)
	}
	return nil
}

// bind binds src at dst (recursively), read-only when ro.
func bind(src, dst string, ro bool) error {
	if err := mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return err
	}
	if ro {
		return mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, "")
	}
	return nil
}

// mountPoint makes an empty directory, or an empty file when like is not a
// directory, at path.
func mountPoint(path string, like os.FileInfo) error {
	if like.IsDir() {
		return os.MkdirAll(path, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// buildRoot lays out the container's root at root: a tmpfs with the
// image's userland, /etc, /proc, /sys, /dev, the volumes and nothing else.
func buildRoot(c *container, root string) error {
	if err := privateExceptShared(c.Volumes); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := mount("tmpfs", root, "tmpfs", 0, "mode=755"); err != nil {
		return err
	}
	for _, d := range userland {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, root+d); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(root+d, 0o755); err != nil {
			return err
		}
		if err := bind(d, root+d, true); err != nil {
			return err
		}
	}
	for _, p := range hidden {
		if fi, err := os.Stat(root + p); err == nil && fi.IsDir() {
			if err := mount("tmpfs", root+p, "tmpfs", syscall.MS_RDONLY, "mode=755"); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{"etc", "proc", "sys", "dev", "tmp", "run", "var/tmp", "root"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	_ = os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	_ = os.Chmod(filepath.Join(root, "var/tmp"), 0o1777)
	_ = os.Symlink("../run", filepath.Join(root, "var/run"))
	for _, f := range etcFiles {
		if data, err := os.ReadFile(filepath.Join("/etc", f)); err == nil {
			if err := os.WriteFile(filepath.Join(root, "etc", f), data, 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hostname"), []byte(c.Hostname+"\n"), 0o644); err != nil {
		return err
	}
	if fi, err := os.Stat("/etc/kedge-lab"); err == nil && fi.IsDir() {
		if err := os.MkdirAll(filepath.Join(root, "etc/kedge-lab"), 0o755); err != nil {
			return err
		}
		if err := bind("/etc/kedge-lab", filepath.Join(root, "etc/kedge-lab"), true); err != nil {
			return err
		}
	}
	if err := mount("proc", filepath.Join(root, "proc"), "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return err
	}
	// The kernel's answers are the host's, as a container shares its
	// kernel: a test host's boot ID and booted kernel release (bound over
	// the host's /proc) show in its containers too.
	for _, f := range []string{"sys/kernel/random/boot_id", "sys/kernel/osrelease"} {
		if err := bind("/proc/"+f, filepath.Join(root, "proc", f), true); err != nil {
			return err
		}
	}
	if err := bind("/sys", filepath.Join(root, "sys"), !c.Privileged); err != nil {
		return err
	}
	if err := buildDev(c, filepath.Join(root, "dev")); err != nil {
		return err
	}
	for _, t := range c.Tmpfs {
		path, opts, _ := strings.Cut(t, ":")
		if err := os.MkdirAll(root+path, 0o755); err != nil {
			return err
		}
		if err := mount("tmpfs", root+path, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
			return err
		}
	}
	// Shallow volumes first, so a deeper one lands inside a shallower one.
	vols := append([]volume{}, c.Volumes...)
	sort.SliceStable(vols, func(i, j int) bool {
		return strings.Count(vols[i].Dst, "/") < strings.Count(vols[j].Dst, "/")
	})
	for _, v := range vols {
		fi, err := os.Stat(v.Src)
		if err != nil {
			return fmt.Errorf("error mounting %q to rootfs at %q: %w", v.Src, v.Dst, err)
		}
		target := root + v.Dst
		if err := mountPoint(target, fi); err != nil {
			return fmt.Errorf("error mounting %q to rootfs at %q: %w", v.Src, v.Dst, err)
		}
		if err := bind(v.Src, target, v.ReadOnly); err != nil {
			return fmt.Errorf("error mounting %q to rootfs at %q: %w", v.Src, v.Dst, err)
		}
	}
	return nil
}

// buildDev gives the container a /dev: the host's with --privileged, else
// the few devices docker gives every container.
func buildDev(c *container, dev string) error {
	if c.Privileged {
		return bind("/dev", dev, false)
	}
	if err := mount("tmpfs", dev, "tmpfs", syscall.MS_NOSUID, "mode=755"); err != nil {
		return err
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := mountPoint(filepath.Join(dev, d), fileInfo{}); err != nil {
			return err
		}
		if err := bind("/dev/"+d, filepath.Join(dev, d), false); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.MkdirAll(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if _, err := os.Stat("/dev/pts/ptmx"); err == nil {
		if err := bind("/dev/pts", filepath.Join(dev, "pts"), false); err != nil {
			return err
		}
	}
	if err := mount("shm", filepath.Join(dev, "shm"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "mode=1777"); err != nil {
		return err
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		_ = os.Symlink(target, filepath.Join(dev, name))
	}
	return nil
}

// fileInfo describes a plain file, for mountPoint.
type fileInfo struct{ os.FileInfo }

func (fileInfo) IsDir() bool { return false }

// enterRoot makes root the process's root and drops the host's.
func enterRoot(root string) error {
	oldRoot, err := os.Open("/")
	if err != nil {
		return err
	}
	defer oldRoot.Close()
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := syscall.PivotRoot(".", "."); err == nil {
		// Back in the host's root, now stacked over ours, which becomes
		// a slave before it goes, as runc does: detaching it while the
		// volumes in it are still shared would propagate its unmounts to
		// the host, taking the mounts the host has under a shared volume
		// (the tmpfs of every pod's projected volume under
		// /var/lib/kubelet, which a restarted kubelet would then mount
		// anew while the pods keep the old one, never updated again).
		if err := syscall.Fchdir(int(oldRoot.Fd())); err != nil {
			return fmt.Errorf("back to the host's root: %w", err)
		}
		if err := syscall.Mount("", ".", "", syscall.MS_SLAVE|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("make the host's root a slave: %w", err)
		}
		if err := syscall.Unmount(".", syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("detach the host's root: %w", err)
		}
		return os.Chdir("/")
	}
	// pivot_root is refused on some roots (an initramfs): chroot instead.
	if err := syscall.Chroot("."); err != nil {
		return fmt.Errorf("chroot %s: %w", root, err)
	}
	return os.Chdir("/")
}
