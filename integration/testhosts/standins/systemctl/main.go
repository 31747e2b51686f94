// Command systemctl is a test-host stand-in for systemd's systemctl (and,
// under the name journalctl, for `journalctl -u`). It reads real unit files
// and drop-ins and really starts, stops and restarts their processes, so
// runbooks that drive systemd can be tested on hosts without systemd. It
// is test infrastructure only.
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

const (
	stateDir = "/run/systemctl"
	logDir   = "/var/log/units"
)

func main() {
	if filepath.Base(os.Args[0]) == "journalctl" {
		os.Exit(journal(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:]))
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	return 1
}

func run(args []string) int {
	var opts []string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" || a == "--property":
			if i+1 < len(args) {
				opts = append(opts, "-p="+args[i+1])
				i++
			}
		case strings.HasPrefix(a, "-"):
			opts = append(opts, a)
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		return fail("systemctl stand-in: no command")
	}
	cmd, units := rest[0], rest[1:]
	for i := range units {
		units[i] = normalize(units[i])
	}
	_ = os.MkdirAll(stateDir, 0o755)
	_ = os.MkdirAll(logDir, 0o755)
	switch cmd {
	case "daemon-reload":
		f, err := os.OpenFile(filepath.Join(stateDir, "daemon-reloads"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano))
			f.Close()
		}
		return 0
	case "__supervise":
		return supervise(units[0])
	}
	if len(units) == 0 {
		return fail("systemctl stand-in: %s needs a unit", cmd)
	}
	rc := 0
	for _, u := range units {
		var r int
		switch cmd {
		case "start":
			r = start(u)
		case "stop":
			r = stop(u)
		case "restart":
			if r = stop(u); r == 0 {
				r = start(u)
			}
		case "reload", "reload-or-restart", "try-restart":
			if r = stop(u); r == 0 {
				r = start(u)
			}
		case "enable":
			r = enable(u, true)
		case "disable":
			r = enable(u, false)
		case "is-active":
			s := activeState(u)
			fmt.Println(s)
			if s != "active" {
				r = 3
			}
		case "is-failed":
			s := activeState(u)
			fmt.Println(s)
			if s != "failed" {
				r = 1
			}
		case "is-enabled":
			if enabled(u) {
				fmt.Println("enabled")
			} else {
				fmt.Println("disabled")
				r = 1
			}
		case "show":
			r = show(u, opts)
		case "status":
			r = status(u)
		case "cat":
			r = cat(u)
		default:
			return fail("systemctl stand-in: unknown command %q", cmd)
		}
		rc = max(rc, r)
	}
	return rc
}

func pidFile(u string) string  { return filepath.Join(stateDir, u+".pid") }
func exitFile(u string) string { return filepath.Join(stateDir, u+".exit") }
func logFile(u string) string  { return filepath.Join(logDir, u+".log") }
func onFile(u string) string   { return filepath.Join(stateDir, u+".active") }

func mainPID(u string) int {
	data, err := os.ReadFile(pidFile(u))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 || syscall.Kill(pid, 0) != nil || zombie(pid) {
		return 0
	}
	return pid
}

func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndex(s, ")")
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func activeState(u string) string {
	if mainPID(u) > 0 {
		return "active"
	}
	if _, err := os.Stat(onFile(u)); err == nil {
		return "active" // oneshot with RemainAfterExit
	}
	if data, err := os.ReadFile(exitFile(u)); err == nil && strings.TrimSpace(string(data)) != "0" {
		return "failed"
	}
	return "inactive"
}

func start(name string) int {
	if activeState(name) == "active" {
		return 0
	}
	u, err := loadUnit(name)
	if err != nil {
		return fail("Failed to start %s: Unit %s not found.", name, name)
	}
	_ = os.Remove(exitFile(name))
	env := u.env()
	logf, err := os.OpenFile(logFile(name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fail("%v", err)
	}
	defer logf.Close()
	for _, line := range u.ExecStartPre {
		argv, ignore := command(line, env)
		if err := runSync(argv, env, logf); err != nil && !ignore {
			_ = os.WriteFile(exitFile(name), []byte("1"), 0o644)
			return fail("Job for %s failed: ExecStartPre %v: %v", name, argv, err)
		}
	}
	if len(u.ExecStart) == 0 {
		return fail("%s has no ExecStart", name)
	}
	if u.Type == "oneshot" {
		for _, line := range u.ExecStart {
			argv, ignore := command(line, env)
			if err := runSync(argv, env, logf); err != nil && !ignore {
				_ = os.WriteFile(exitFile(name), []byte("1"), 0o644)
				return fail("Job for %s failed: %v", name, err)
			}
		}
		_ = os.WriteFile(exitFile(name), []byte("0"), 0o644)
		if u.RemainAfterExit {
			_ = os.WriteFile(onFile(name), nil, 0o644)
		}
		return 0
	}
	// A detached supervisor starts the main process, records its pid and,
	// when it ends, its exit status.
	self, _ := os.Executable()
	sup := exec.Command(self, "__supervise", name)
	sup.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	sup.Stdout, sup.Stderr = logf, logf
	if err := sup.Start(); err != nil {
		return fail("start %s: %v", name, err)
	}
	_ = sup.Process.Release()
	for range 200 {
		if mainPID(name) > 0 {
			return 0
		}
		if data, err := os.ReadFile(exitFile(name)); err == nil {
			return fail("Job for %s failed: main process exited with status %s", name, strings.TrimSpace(string(data)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fail("Job for %s timed out starting", name)
}

func runSync(argv, env []string, logf *os.File) error {
	if len(argv) == 0 {
		return errors.New("empty command")
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Env, c.Stdout, c.Stderr = env, logf, logf
	return c.Run()
}

func supervise(name string) int {
	u, err := loadUnit(name)
	if err != nil {
		return 1
	}
	env := u.env()
	argv, _ := command(u.ExecStart[0], env)
	if len(argv) == 0 {
		_ = os.WriteFile(exitFile(name), []byte("203"), 0o644)
		return 1
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Env, c.Stdout, c.Stderr = env, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		_ = os.WriteFile(exitFile(name), []byte("203"), 0o644)
		return 1
	}
	_ = os.WriteFile(pidFile(name), []byte(strconv.Itoa(c.Process.Pid)), 0o644)
	err = c.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	// A stop leaves its own marker; a process that died by itself is failed.
	if _, stopped := os.Stat(filepath.Join(stateDir, name+".stopping")); stopped == nil {
		code = 0
	}
	_ = os.WriteFile(exitFile(name), []byte(strconv.Itoa(code)), 0o644)
	_ = os.Remove(pidFile(name))
	return 0
}

func stop(name string) int {
	_ = os.Remove(onFile(name))
	pid := mainPID(name)
	if pid == 0 {
		return 0
	}
	marker := filepath.Join(stateDir, name+".stopping")
	_ = os.WriteFile(marker, nil, 0o644)
	defer os.Remove(marker)
	if u, err := loadUnit(name); err == nil {
		env := append(u.env(), "MAINPID="+strconv.Itoa(pid))
		for _, line := range u.ExecStop {
			argv, _ := command(line, env)
			_ = runSync(argv, env, os.Stderr)
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for range 500 {
		if mainPID(name) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if mainPID(name) != 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for range 300 {
		if _, err := os.Stat(pidFile(name)); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

func wantsLink(u string) string {
	return filepath.Join("/etc/systemd/system/multi-user.target.wants", u)
}

func enabled(u string) bool {
	_, err := os.Lstat(wantsLink(u))
	return err == nil
}

func enable(name string, on bool) int {
	if !on {
		_ = os.Remove(wantsLink(name))
		return 0
	}
	u, err := loadUnit(name)
	if err != nil {
		return fail("Failed to enable unit: Unit file %s does not exist.", name)
	}
	_ = os.MkdirAll(filepath.Dir(wantsLink(name)), 0o755)
	_ = os.Remove(wantsLink(name))
	if err := os.Symlink(u.Paths[0], wantsLink(name)); err != nil {
		return fail("%v", err)
	}
	return 0
}

func show(name string, opts []string) int {
	var props []string
	value := false
	for _, o := range opts {
		if p, ok := strings.CutPrefix(o, "-p="); ok {
			props = append(props, strings.Split(p, ",")...)
		}
		if o == "--value" {
			value = true
		}
	}
	state := activeState(name)
	sub := map[string]string{"active": "running", "inactive": "dead", "failed": "failed"}[state]
	all := map[string]string{"ActiveState": state, "SubState": sub, "MainPID": strconv.Itoa(mainPID(name)), "Id": name}
	if len(props) == 0 {
		props = []string{"Id", "ActiveState", "SubState", "MainPID"}
	}
	for _, p := range props {
		if value {
			fmt.Println(all[p])
		} else {
			fmt.Printf("%s=%s\n", p, all[p])
		}
	}
	return 0
}

func status(name string) int {
	u, err := loadUnit(name)
	if err != nil {
		fmt.Printf("Unit %s could not be found.\n", name)
		return 4
	}
	state := activeState(name)
	fmt.Printf("* %s\n     Loaded: loaded (%s)\n     Active: %s\n   Main PID: %d\n", name, strings.Join(u.Paths, ", "), state, mainPID(name))
	if state != "active" {
		return 3
	}
	return 0
}

func cat(name string) int {
	u, err := loadUnit(name)
	if err != nil {
		return fail("No files found for %s.", name)
	}
	for _, p := range u.Paths {
		data, _ := os.ReadFile(p)
		fmt.Printf("# %s\n%s\n", p, data)
	}
	return 0
}

func journal(args []string) int {
	for i, a := range args {
		if (a == "-u" || a == "--unit") && i+1 < len(args) {
			data, err := os.ReadFile(logFile(normalize(args[i+1])))
			if err != nil {
				return 0
			}
			os.Stdout.Write(data)
			return 0
		}
	}
	return fail("journalctl stand-in: only -u UNIT is supported")
}
