package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultPath is a container's PATH, as most images set it.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runError is a refused run: the message as the real program words it.
func runError(format string, args ...any) int {
	if prog == "podman" {
		fmt.Fprintf(os.Stderr, "Error: "+format+"\n", args...)
	} else {
		fmt.Fprintf(os.Stderr, "docker: "+format+".\n", args...)
	}
	return 125
}

// volume options docker and podman accept (SELinux labels and the
// consistency options have no effect here; shared and rshared do:
// propagation.go).
var volumeOptions = map[string]bool{
	"ro": true, "rw": true, "z": true, "Z": true, "shared": true, "rshared": true, "slave": true,
	"rslave": true, "private": true, "rprivate": true, "nocopy": true, "consistent": true,
	"cached": true, "delegated": true,
}

func parseVolume(spec string) (volume, error) {
	parts := strings.Split(spec, ":")
	if len(parts) == 1 {
		return volume{}, fmt.Errorf("anonymous volume %s is not supported by the container stand-in", spec)
	}
	if len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return volume{}, fmt.Errorf("invalid volume specification: '%s'", spec)
	}
	v := volume{Src: parts[0], Dst: parts[1]}
	if !filepath.IsAbs(v.Dst) {
		return volume{}, fmt.Errorf("invalid volume specification: '%s': invalid mount config for type \"bind\": invalid mount path: '%s' mount path must be absolute", spec, v.Dst)
	}
	if !filepath.IsAbs(v.Src) {
		return volume{}, fmt.Errorf("named volume %q is not supported by the container stand-in", v.Src)
	}
	if len(parts) == 3 {
		rw := 0
		for _, o := range strings.Split(parts[2], ",") {
			if !volumeOptions[o] {
				return volume{}, fmt.Errorf("invalid mode: %s", parts[2])
			}
			if o == "ro" {
				v.ReadOnly = true
			}
			if o == "shared" || o == "rshared" {
				v.Shared = true
			}
			if o == "ro" || o == "rw" {
				rw++
			}
		}
		if rw > 1 {
			return volume{}, fmt.Errorf("invalid mode: %s", parts[2])
		}
	}
	v.Src, v.Dst = filepath.Clean(v.Src), filepath.Clean(v.Dst)
	return v, nil
}

var ulimitNames = map[string]int{
	"core": syscall.RLIMIT_CORE, "cpu": syscall.RLIMIT_CPU, "data": syscall.RLIMIT_DATA,
	"fsize": syscall.RLIMIT_FSIZE, "nofile": syscall.RLIMIT_NOFILE, "stack": syscall.RLIMIT_STACK,
	"as": syscall.RLIMIT_AS, "nproc": 6, "memlock": 8,
}

func parseUlimit(s string) (ulimit, error) {
	name, vals, ok := strings.Cut(s, "=")
	if !ok {
		return ulimit{}, fmt.Errorf("invalid argument %q for \"--ulimit\" flag: invalid ulimit argument: %s", s, s)
	}
	if _, known := ulimitNames[name]; !known {
		return ulimit{}, fmt.Errorf("invalid argument %q for \"--ulimit\" flag: invalid ulimit type: %s", s, name)
	}
	soft, hard, hasHard := strings.Cut(vals, ":")
	parse := func(v string) (uint64, error) {
		if v == "-1" || v == "unlimited" {
			return ^uint64(0), nil
		}
		return strconv.ParseUint(v, 10, 64)
	}
	u := ulimit{Name: name}
	var err error
	if u.Soft, err = parse(soft); err != nil {
		return ulimit{}, fmt.Errorf("invalid argument %q for \"--ulimit\" flag: invalid ulimit soft value %s", s, soft)
	}
	u.Hard = u.Soft
	if hasHard {
		if u.Hard, err = parse(hard); err != nil {
			return ulimit{}, fmt.Errorf("invalid argument %q for \"--ulimit\" flag: invalid ulimit hard value %s", s, hard)
		}
	}
	if u.Soft > u.Hard {
		return ulimit{}, fmt.Errorf("invalid argument %q for \"--ulimit\" flag: ulimit soft limit must be less than or equal to hard limit: %d > %d", s, u.Soft, u.Hard)
	}
	return u, nil
}

// newContainer makes the container a run describes, refusing what the
// real program refuses. It returns the exit status on a refusal.
func newContainer(args []string) (*container, bool, int) {
	f, pos, err := runSpec.parse(args)
	if err != nil {
		return nil, false, usageError("run", err)
	}
	if len(pos) == 0 {
		return nil, false, usageError("run", fmt.Errorf("\"%s run\" requires at least 1 argument", prog))
	}
	ref, cmdArgs := pos[0], pos[1:]
	c := &container{Image: ref, Remove: f.has("rm"), Privileged: f.has("privileged"),
		Name: f.last("name"), Hostname: f.last("hostname"), WorkDir: f.last("workdir"),
		User: f.last("user"), LogDriver: f.last("log-driver"), Tmpfs: f["tmpfs"], Created: time.Now()}
	for _, k := range []string{"network", "net", "pid"} {
		v := f.last(k)
		if v == "none" && k != "pid" {
			c.NoNetwork = true
			continue
		}
		if v != "" && v != "host" {
			return nil, false, runError("--%s %s is not supported by the container stand-in (only host and none)", k, v)
		}
	}
	switch c.LogDriver {
	case "", "json-file", "journald", "k8s-file", "local", "none", "passthrough":
	default:
		return nil, false, runError("Error response from daemon: logger: no log driver named '%s' is registered", c.LogDriver)
	}
	if c.WorkDir != "" && !filepath.IsAbs(c.WorkDir) {
		return nil, false, runError("Error response from daemon: the working directory '%s' is invalid, it needs to be an absolute path", c.WorkDir)
	}
	if c.User != "" && strings.Trim(strings.Replace(c.User, ":", "", 1), "0123456789") != "" && c.User != "root" {
		return nil, false, runError("user %s is not supported by the container stand-in (numeric UID[:GID] only)", c.User)
	}
	for _, s := range f["volume"] {
		v, err := parseVolume(s)
		if err != nil {
			return nil, false, runError("Error response from daemon: %v", err)
		}
		if _, err := os.Stat(v.Src); err != nil {
			if prog == "podman" {
				return nil, false, runError("statfs %s: no such file or directory", v.Src)
			}
			// docker makes a missing bind source a directory.
			if err := os.MkdirAll(v.Src, 0o755); err != nil {
				return nil, false, runError("Error response from daemon: %v", err)
			}
		}
		if prog == "docker" {
			if err := checkShared(v); err != nil {
				return nil, false, runError("Error response from daemon: %v", err)
			}
		}
		c.Volumes = append(c.Volumes, v)
	}
	for _, s := range f["ulimit"] {
		u, err := parseUlimit(s)
		if err != nil {
			return nil, false, usageError("run", err)
		}
		c.Ulimits = append(c.Ulimits, u)
	}
	for _, t := range c.Tmpfs {
		if !filepath.IsAbs(strings.SplitN(t, ":", 2)[0]) {
			return nil, false, runError("Error response from daemon: invalid mount path: '%s' mount path must be absolute", t)
		}
	}
	env := []string{"PATH=" + defaultPath, "HOME=/root"}
	for _, file := range f["env-file"] {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, false, usageError("run", fmt.Errorf("open %s: no such file or directory", file))
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
				env = appendEnv(env, line)
			}
		}
	}
	for _, e := range f["env"] {
		env = appendEnv(env, e)
	}
	if !validRef(ref) {
		return nil, false, runError("invalid reference format")
	}
	im, ok := findImage(ref)
	if !ok {
		if prog == "podman" {
			return nil, false, runError("%s: image not known", ref)
		}
		name, _, _ := splitRef(ref)
		fmt.Fprintf(os.Stderr, "Unable to find image '%s' locally\n", ref)
		return nil, false, runError("Error response from daemon: pull access denied for %s, repository does not exist or may require 'docker login'", name)
	}
	c.Argv = append([]string{}, im.Entrypoint...)
	if ep := f.last("entrypoint"); ep != "" {
		c.Argv = append(c.Argv, ep)
	}
	c.Argv = append(c.Argv, cmdArgs...)
	c.ID = newID("")
	if c.Hostname == "" {
		// A container on the host's network has the host's name.
		c.Hostname = c.ID[:12]
		if f.last("network") == "host" || f.last("net") == "host" {
			c.Hostname, _ = os.Hostname()
		}
	}
	c.Env = append(env, "HOSTNAME="+c.Hostname, "KEDGE_LAB_IMAGE="+ref)
	if c.Name == "" {
		c.Name = "standin_" + c.ID[:8]
	}
	for _, o := range containers() {
		if o.Name == c.Name {
			if prog == "podman" {
				return nil, false, runError("creating container storage: the container name %q is already in use by %s. You have to remove that container to be able to reuse that name: that name is already in use", c.Name, o.ID)
			}
			return nil, false, runError("Error response from daemon: Conflict. The container name \"/%s\" is already in use by container \"%s\". You have to remove (or rename) that container to be able to reuse that name", c.Name, o.ID)
		}
	}
	return c, f.has("detach"), 0
}

// appendEnv adds KEY=VALUE, or KEY with the caller's value (dropped when
// the caller has none), as docker does.
func appendEnv(env []string, e string) []string {
	if strings.Contains(e, "=") {
		return append(env, e)
	}
	if v, ok := os.LookupEnv(e); ok {
		return append(env, e+"="+v)
	}
	return env
}

func run(args []string) int {
	c, detach, rc := newContainer(args)
	if c == nil {
		return rc
	}
	if err := c.save(); err != nil {
		return runError("Error response from daemon: %v", err)
	}
	if !detach {
		return c.runAttached(os.Stdout, os.Stderr, true)
	}
	self, err := os.Executable()
	if err != nil {
		return runError("%v", err)
	}
	sup := exec.Command(self, "__supervise", c.ID)
	sup.Env = os.Environ()
	sup.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sup.Start(); err != nil {
		return runError("%v", err)
	}
	_ = sup.Process.Release()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if msg, err := os.ReadFile(c.file("start-error")); err == nil {
			os.Stderr.Write(msg)
			return c.exitCode()
		}
		_, err := os.Stat(c.file("pid"))
		if _, gone := os.Stat(c.dir()); err == nil || gone != nil {
			fmt.Println(c.ID)
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	return runError("Error response from daemon: container %s did not start", c.ID)
}

// supervise runs a detached container (run -d).
func supervise(id string) int {
	c, err := loadContainer(id)
	if err != nil {
		return 1
	}
	return c.runAttached(io.Discard, io.Discard, false)
}

// runAttached starts the container's process, copies its output to its log
// (and to stdout/stderr), waits for it, records its exit status, removes
// the container if --rm, and returns the status. forward passes the
// signals it gets on to the process (docker run's --sig-proxy).
func (c *container) runAttached(stdout, stderr io.Writer, forward bool) int {
	self, err := os.Executable()
	if err != nil {
		return runError("%v", err)
	}
	var logf io.Writer = io.Discard
	if c.LogDriver != "none" {
		f, err := os.OpenFile(c.file("log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return runError("%v", err)
		}
		defer f.Close()
		logf = f
	}
	status, statusW, err := os.Pipe()
	if err != nil {
		return runError("%v", err)
	}
	cmd := exec.Command(self, "__init", c.ID)
	cmd.Env = os.Environ()
	cmd.ExtraFiles = []*os.File{statusW}
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS)
	if c.NoNetwork {
		flags |= syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	outR, outW, err := os.Pipe()
	if err != nil {
		return runError("%v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return runError("%v", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	statusW.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		status.Close()
		c.fail(126, fmt.Sprintf("failed to create the container's namespaces: %v\n", err))
		return runError("Error response from daemon: failed to create task for container: %v", err)
	}
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(io.MultiWriter(stdout, logf), outR); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(io.MultiWriter(stderr, logf), errR); copied <- struct{}{} }()
	// The process reports a failure to set the container up on the status
	// pipe; a successful exec closes it with nothing written.
	msg, _ := io.ReadAll(status)
	status.Close()
	pid := cmd.Process.Pid
	if len(msg) == 0 {
		_ = os.WriteFile(c.file("pid"), []byte(fmt.Sprintf("%d %s", pid, startTicks(pid))), 0o600)
	}
	if forward {
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
		go func() {
			for s := range sigs {
				_ = cmd.Process.Signal(s)
			}
		}()
	}
	err = cmd.Wait()
	// Output still buffered in the pipes is copied; a child the process
	// left behind with the pipes open does not hold the container up.
	for range 2 {
		select {
		case <-copied:
		case <-time.After(time.Second):
		}
	}
	outR.Close()
	errR.Close()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	if len(msg) > 0 {
		c.fail(code, string(msg))
		if !forward {
			return code
		}
		fmt.Fprint(stderr, string(msg))
		if c.Remove {
			_ = os.RemoveAll(c.dir())
		}
		return code
	}
	_ = os.WriteFile(c.file("exit"), []byte(strconv.Itoa(code)), 0o600)
	if c.Remove {
		_ = os.RemoveAll(c.dir())
	}
	return code
}

// fail records a container that could not start.
func (c *container) fail(code int, msg string) {
	_ = os.WriteFile(c.file("exit"), []byte(strconv.Itoa(code)), 0o600)
	_ = os.WriteFile(c.file("start-error"), []byte(msg), 0o600)
}
