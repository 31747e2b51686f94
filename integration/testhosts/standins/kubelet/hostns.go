package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// A container runtime runs a pod's containers on the host, beside the
// kubelet's container, not inside it: a static pod sees the host's files
// through its hostPath volumes, and what it writes there outlives the
// kubelet container. The simulator's container (under the container
// stand-in) has a private mount namespace holding only its volumes, so it
// starts each static pod process through a small helper, itself re-executed
// with argv[0] enterHostArg0, that joins the host's mount namespace and
// execs the program. The container shares the host's PID namespace
// (--pid host), so the host's mount namespace is PID 1's.

// enterHostArg0 is argv[0] of the helper: the simulator's own binary,
// re-executed as `enterHostArg0 NS-PATH DIR USER PROGRAM [ARGS...]`, USER
// being the identity to run as (runAs's form, "" for root).
const enterHostArg0 = "kubelet-sim-enter-host-mount-ns"

// defaultHostMountNS is the host's mount namespace as a container with
// --pid host sees it.
const defaultHostMountNS = "/proc/1/ns/mnt"

// hostMountNS decides where static pod processes run. setting is
// KEDGE_LAB_HOST_MOUNT_NS: empty means the default, /proc/1/ns/mnt, used
// only when it can be read (a simulator run outside a test host, by its
// own tests, may not see PID 1's); "none" means the simulator's own mount
// namespace; any other value is a namespace file that must be readable.
// It returns "" when the processes run in the simulator's own namespace,
// with why.
func hostMountNS(setting string) (path, why string, err error) {
	switch setting {
	case "none":
		return "", envHostMountNS + "=none", nil
	case "":
		path = defaultHostMountNS
	default:
		path = setting
	}
	same, err := sameMountNS(path)
	if err != nil {
		if setting == "" {
			return "", fmt.Sprintf("cannot read %s: %v", path, err), nil
		}
		return "", "", fmt.Errorf("%s: %w", envHostMountNS, err)
	}
	if same {
		return "", "the simulator runs in " + path + " already", nil
	}
	return path, "", nil
}

// sameMountNS says whether the namespace file path is this process's mount
// namespace.
func sameMountNS(path string) (bool, error) {
	var ns, self unix.Stat_t
	if err := unix.Stat(path, &ns); err != nil {
		return false, err
	}
	if err := unix.Stat("/proc/self/ns/mnt", &self); err != nil {
		return false, err
	}
	return ns.Dev == self.Dev && ns.Ino == self.Ino, nil
}

// enterHostCommand wraps argv so that it runs in the mount namespace at
// nsPath, in dir (or / when dir is not there), as user.
func enterHostCommand(nsPath, dir string, user *runAs, argv []string) (path string, args []string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	return self, append([]string{enterHostArg0, nsPath, dir, user.String()}, argv...), nil
}

// enterHostMain is the helper: it joins the mount namespace os.Args[1],
// changes to os.Args[2], becomes the user os.Args[3] (its group looked up
// in that namespace's /etc/passwd when not given) and execs os.Args[4:],
// looked up in that namespace's PATH directories. It returns only on
// failure, with the exit code a runtime gives a container it could not
// start.
func enterHostMain() int {
	if len(os.Args) < 5 {
		fmt.Fprintf(os.Stderr, "%s: want NS-PATH DIR USER PROGRAM [ARGS...]\n", enterHostArg0)
		return 125
	}
	nsPath, dir, argv := os.Args[1], os.Args[2], os.Args[4:]
	user, err := parseRunAs(os.Args[3])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", enterHostArg0, err)
		return 125
	}
	if err := joinMountNS(nsPath); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", enterHostArg0, err)
		return 125
	}
	if user != nil {
		user.resolve("/etc/passwd")
		if err := becomeUser(user); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", enterHostArg0, err)
			return 125
		}
	}
	if dir == "" || os.Chdir(dir) != nil {
		_ = os.Chdir("/")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", enterHostArg0, err)
		return 127
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "%s: exec %s: %v\n", enterHostArg0, path, err)
	return 126
}

// becomeUser drops root for user, groups first (after setuid the process
// could no longer change them). Go applies each call to every thread.
func becomeUser(user *runAs) error {
	groups := make([]int, len(user.groups))
	for i, g := range user.groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups %v: %w", groups, err)
	}
	if err := syscall.Setgid(int(user.gid)); err != nil {
		return fmt.Errorf("setgid %d: %w", user.gid, err)
	}
	if err := syscall.Setuid(int(user.uid)); err != nil {
		return fmt.Errorf("setuid %d: %w", user.uid, err)
	}
	return nil
}

// joinMountNS moves the calling thread into the mount namespace at path.
// The kernel refuses setns(CLONE_NEWNS) to a thread that shares its
// filesystem attributes (root, cwd, umask) with others, as every thread of
// a Go program does, so the thread first stops sharing them. The thread
// stays locked: the exec that follows must happen on it.
func joinMountNS(path string) error {
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare the filesystem attributes: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("join the mount namespace %s: %w", path, err)
	}
	return nil
}
