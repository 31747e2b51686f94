package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a running container process: one the simulator started (it
// reaps it and knows its exit code) or one it adopted from an earlier run.
type proc struct {
	pid int
	// startTicks is the process's start time in /proc/PID/stat, which
	// tells it from a later process given the same pid.
	startTicks uint64
	startedAt  time.Time
	exited     chan struct{} // closed when a started process ends; nil when adopted
	exitCode   int           // valid once exited is closed
}

// startDetached starts argv as a container does: in its own session (so it
// outlives the kubelet and a stop signals its whole process group), in the
// mount namespace hostNS (the simulator's own when ""), stdin from
// /dev/null, stdout and stderr appended to logPath.
func startDetached(p process, hostNS, logPath string) (*proc, error) {
	if len(p.argv) == 0 {
		return nil, errors.New("no command")
	}
	if p.refused != nil {
		return nil, p.refused
	}
	var path string
	args, dir := p.argv, p.dir
	var err error
	if hostNS != "" {
		// The helper looks the program and the directory up in the host's
		// view, and keeps the pid: it execs the program.
		path, args, err = enterHostCommand(hostNS, dir, p.user, p.argv)
		dir = ""
	} else {
		path, err = exec.LookPath(p.argv[0])
		if dir != "" {
			if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
				dir = "" // as the helper does: / when the directory is not there
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := &exec.Cmd{Path: path, Args: args, Env: p.env, Dir: dir, Stdout: logf, Stderr: logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if hostNS == "" && p.user != nil {
		// In the host's namespace the helper changes identity after it
		// joins (a process that is not root could not join).
		u := *p.user
		u.resolve("/etc/passwd")
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pr := &proc{pid: cmd.Process.Pid, startedAt: time.Now(), exited: make(chan struct{})}
	pr.startTicks, _, _ = procStat(pr.pid)
	go func() {
		err := cmd.Wait()
		pr.exitCode = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			pr.exitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				pr.exitCode = 128 + int(ws.Signal())
			}
		} else if err != nil {
			pr.exitCode = -1
		}
		close(pr.exited)
	}()
	return pr, nil
}

// adopt returns the process pid if it still runs and started at
// startTicks, nil otherwise.
func adopt(pid int, startTicks uint64, startedAt time.Time) *proc {
	if pid <= 0 {
		return nil
	}
	ticks, state, err := procStat(pid)
	if err != nil || ticks != startTicks || state == 'Z' || state == 'X' {
		return nil
	}
	return &proc{pid: pid, startTicks: startTicks, startedAt: startedAt, exitCode: -1}
}

// alive says whether the process still runs (a zombie does not).
func (p *proc) alive() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
		}
	}
	ticks, state, err := procStat(p.pid)
	if err != nil || state == 'Z' || state == 'X' {
		return false
	}
	return p.startTicks == 0 || ticks == p.startTicks
}

// exit is the exit code of a process that is no longer alive, or -1 when
// unknown (an adopted process).
func (p *proc) exit() int {
	if p.exited == nil {
		return -1
	}
	select {
	case <-p.exited:
		return p.exitCode
	case <-time.After(time.Second): // a zombie not reaped yet
		return -1
	}
}

// signal signals the process's group and the process itself.
func (p *proc) signal(sig syscall.Signal) {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(-p.pid, sig)
	_ = syscall.Kill(p.pid, sig)
}

// stop ends the process as a runtime stops a container: SIGTERM, then
// SIGKILL when it still runs after grace. It returns once it is gone (or
// has ignored SIGKILL for five seconds).
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	if p.waitGone(grace) {
		return
	}
	p.signal(syscall.SIGKILL)
	p.waitGone(5 * time.Second)
}

func (p *proc) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// procStat reads a process's start time (clock ticks after boot) and state
// from /proc/PID/stat.
func procStat(pid int) (startTicks uint64, state byte, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name, in parentheses, may hold spaces; fields follow it.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is the state (field 3); starttime is field 22.
	if len(fields) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, err
	}
	return ticks, fields[0][0], nil
}
