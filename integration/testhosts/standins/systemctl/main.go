// Command systemctl is a test-host stand-in for systemd's systemctl (and,
// under the name journalctl, for `journalctl -u`). It reads real unit files
// and drop-ins and really starts, stops and restarts their processes, so
// runbooks that drive systemd can be tested on hosts without systemd. It
// is test infrastructure only.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	stateDir = "/run/systemctl"
	logDir   = "/var/log/units"
)

func main() {
	switch filepath.Base(os.Args[0]) {
	case "journalctl":
		os.Exit(journal(os.Args[1:]))
	case "reboot":
		os.Exit(rebootCommand(os.Args[1:]))
	case "shutdown":
		os.Exit(shutdownCommand(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:]))
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	return 1
}

// options systemctl has that the stand-in accepts (most change nothing
// here: there is no pager, no job queue, one system manager).
var options = map[string]bool{
	"--value": true, "--now": true, "--no-block": true, "--quiet": true, "-q": true, "--no-pager": true,
	"--full": true, "-l": true, "--no-reload": true, "--system": true, "--all": true, "-a": true,
	"--no-ask-password": true, "--no-legend": true, "--force": true, "-f": true, "--no-wall": true,
}

func run(args []string) int {
	var opts []string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" || a == "--property":
			if i+1 >= len(args) {
				return fail("systemctl: option '%s' requires an argument", a)
			}
			opts = append(opts, "-p="+args[i+1])
			i++
		case strings.HasPrefix(a, "--property="):
			opts = append(opts, "-p="+strings.TrimPrefix(a, "--property="))
		case strings.HasPrefix(a, "-p") && !strings.HasPrefix(a, "--"):
			opts = append(opts, "-p="+strings.TrimPrefix(a, "-p"))
		case a == "--":
			rest = append(rest, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-"):
			if !options[a] {
				if strings.HasPrefix(a, "--") {
					return fail("systemctl: unrecognized option '%s'", a)
				}
				return fail("systemctl: invalid option -- '%s'", strings.TrimPrefix(a, "-"))
			}
			opts = append(opts, a)
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		return fail("systemctl stand-in: no command")
	}
	now := false
	for _, o := range opts {
		now = now || o == "--now"
	}
	cmd, units := rest[0], rest[1:]
	for i := range units {
		units[i] = normalize(units[i])
	}
	_ = os.MkdirAll(stateDir, 0o755)
	_ = os.MkdirAll(logDir, 0o755)
	switch cmd {
	case "daemon-reload":
		return daemonReload()
	case "__supervise":
		return supervise(units[0])
	case "__reboot":
		return reboot()
	case "__boot":
		return bootUnits()
	case "__boot-start":
		if len(units) != 1 {
			return fail("__boot-start needs one unit")
		}
		unlock := lockUnit(units[0])
		defer unlock()
		return start(units[0])
	case "__go-down":
		return goDown()
	case "reboot":
		if len(rest) > 2 {
			return fail("Too many arguments.")
		}
		return requestReboot()
	}
	if len(units) == 0 {
		return fail("systemctl stand-in: %s needs a unit", cmd)
	}
	switch cmd {
	case "start", "stop", "restart", "reload", "reload-or-restart", "try-restart", "enable", "disable",
		"is-active", "is-failed", "is-enabled", "show", "status", "cat":
	default:
		return fail("Unknown command verb '%s'.", cmd)
	}
	rc := 0
	for _, u := range units {
		var r int
		unlock := func() {}
		if jobVerbs[cmd] {
			unlock = lockUnit(u)
		}
		switch cmd {
		case "start":
			warnIfChanged(u)
			r = start(u)
		case "stop":
			warnIfChanged(u)
			r = stop(u)
		case "restart", "reload", "reload-or-restart":
			warnIfChanged(u)
			holdLoaded[u] = true
			if r = stop(u); r == 0 {
				r = start(u)
			}
		case "try-restart":
			warnIfChanged(u)
			holdLoaded[u] = true
			if activeState(u) == "active" {
				if r = stop(u); r == 0 {
					r = start(u)
				}
			}
		case "enable":
			if r = enable(u, true); r == 0 && now {
				r = start(u)
			}
		case "disable":
			if r = enable(u, false); r == 0 && now {
				r = stop(u)
			}
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
			r = isEnabled(u)
		case "show":
			r = show(u, opts)
		case "status":
			warnIfChanged(u)
			r = status(u)
		case "cat":
			r = cat(u)
		}
		unlock()
		rc = max(rc, r)
	}
	return rc
}

// jobVerbs are the commands that queue a job on a unit.
var jobVerbs = map[string]bool{
	"start": true, "stop": true, "restart": true, "reload": true, "reload-or-restart": true,
	"try-restart": true, "enable": true, "disable": true,
}

// lockUnit holds the unit's job lock until the returned func is called.
// systemd runs one job on a unit at a time and a restart is one job, so a
// path unit firing while its service is between the restart's stop and
// start waits, then finds the service active; without the lock both would
// start it (two `docker run --name kubelet`, one refused, and a failed
// start reported for a restart that worked). The lock's file descriptor
// is close-on-exec: the unit's processes do not inherit it.
func lockUnit(name string) func() {
	f, err := os.OpenFile(filepath.Join(stateDir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return func() {}
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	return func() { f.Close() }
}

func pidFile(u string) string        { return filepath.Join(stateDir, u+".pid") }
func invocationFile(u string) string { return filepath.Join(stateDir, u+".invocation") }

// newInvocationID is a random 128-bit ID in systemd's notation (32 hex
// digits).
func newInvocationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// invocationID is the unit's current invocation, empty when it does not
// run.
func invocationID(u string) string {
	if activeState(u) != "active" {
		return ""
	}
	data, _ := os.ReadFile(invocationFile(u))
	return strings.TrimSpace(string(data))
}
func exitFile(u string) string { return filepath.Join(stateDir, u+".exit") }
func logFile(u string) string  { return filepath.Join(logDir, u+".log") }
func onFile(u string) string   { return filepath.Join(stateDir, u+".active") }

// supervisorFile holds the pid of the unit's supervisor (a stop waits for
// it to record the main process's end).
func supervisorFile(u string) string { return filepath.Join(stateDir, u+".supervisor") }

// supervisorAlive says whether the unit's last supervisor still runs.
func supervisorAlive(u string) bool {
	data, err := os.ReadFile(supervisorFile(u))
	if err != nil {
		return false
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid > 0 && syscall.Kill(pid, 0) == nil && !zombie(pid)
}

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
	if strings.HasSuffix(name, ".path") {
		if len(u.PathConds) == 0 {
			return fail("Failed to start %s: Unit %s has no paths to watch.", name, name)
		}
		return startSupervisor(name)
	}
	env := u.env()
	logf, err := os.OpenFile(logFile(name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fail("%v", err)
	}
	defer logf.Close()
	// Every start is a new invocation, as systemd names it.
	_ = os.WriteFile(invocationFile(name), []byte(newInvocationID()), 0o644)
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
	return startSupervisor(name)
}

// startSupervisor starts a detached supervisor that starts the main
// process, records its pid and, when it ends, its exit status; for a
// .path unit, the supervisor is the watcher.
func startSupervisor(name string) int {
	logf, err := os.OpenFile(logFile(name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fail("%v", err)
	}
	defer logf.Close()
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
	// The unit as start loaded it, whatever is on disk by now.
	files, ok := readLoaded(name)
	if !ok {
		return 1
	}
	u := parseUnit(name, files)
	if strings.HasSuffix(name, ".path") {
		return watchPath(u)
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
	_ = os.WriteFile(supervisorFile(name), []byte(strconv.Itoa(os.Getpid())), 0o644)
	_ = os.WriteFile(pidFile(name), []byte(strconv.Itoa(c.Process.Pid)), 0o644)
	err := c.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	// A stop leaves its own marker (and runs ExecStopPost= itself); a
	// process that died by itself is failed.
	if _, stopped := os.Stat(filepath.Join(stateDir, name+".stopping")); stopped == nil {
		code = 0
	} else {
		for _, line := range u.ExecStopPost {
			argv, _ := command(line, env)
			_ = runSync(argv, env, os.Stderr)
		}
	}
	_ = os.WriteFile(exitFile(name), []byte(strconv.Itoa(code)), 0o644)
	_ = os.Remove(pidFile(name))
	return 0
}

func stop(name string) int {
	_, _ = loadUnit(name) // held loaded through the stop
	wasOn := os.Remove(onFile(name)) == nil
	pid := mainPID(name)
	if pid == 0 {
		if wasOn {
			return stopPost(name)
		}
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
	// The supervisor records the exit and removes its pid file once the
	// process has ended. Like systemd, which returns from a stop only
	// when the unit's processes are gone, wait for it (up to systemd's
	// default TimeoutStopSec): returning earlier let a slow supervisor
	// find the stop marker gone, run ExecStopPost= and record an exit
	// after the next start had begun, which then read that exit as its
	// own main process's ("main process exited with status 0").
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(pidFile(name)); err != nil || !supervisorAlive(name) {
			break
		}
	}
	if strings.HasSuffix(name, ".path") {
		_ = os.Remove(pidFile(name))
	}
	return stopPost(name)
}

// stopPost runs ExecStopPost= after a stop.
func stopPost(name string) int {
	u, err := loadUnit(name)
	if err != nil {
		return 0
	}
	env := u.env()
	for _, line := range u.ExecStopPost {
		argv, _ := command(line, env)
		_ = runSync(argv, env, os.Stderr)
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
	all := map[string]string{"ActiveState": state, "SubState": sub, "MainPID": strconv.Itoa(mainPID(name)), "Id": name,
		"LoadState": "not-found", "NeedDaemonReload": "no", "UnitFileState": "", "InvocationID": invocationID(name)}
	if u, err := loadUnit(name); err == nil {
		all["LoadState"] = "loaded"
		all["Type"] = u.Type
		all["Environment"] = environmentProperty(u)
		all["EnvironmentFiles"] = strings.Join(u.EnvFiles, " ")
		all["FragmentPath"] = u.Paths[0]
		all["DropInPaths"] = strings.Join(u.Paths[1:], " ")
		if needsReload(name) {
			all["NeedDaemonReload"] = "yes"
		}
		all["UnitFileState"] = "disabled"
		if enabled(name) {
			all["UnitFileState"] = "enabled"
		} else if !u.HasInstall {
			all["UnitFileState"] = "static"
		}
		if u.Trigger != "" {
			all["Unit"] = u.Trigger
		}
	}
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

// reboot is what a reboot does to the units of a host that cannot go
// down (a host whose namespaces the harness did not make): every running
// unit stops (path units first, so none restarts what it triggers), the
// daemon reloads, then bootUnits.
func reboot() int {
	running := map[string]bool{}
	for _, pattern := range []string{"*.pid", "*.active"} {
		m, _ := filepath.Glob(filepath.Join(stateDir, pattern))
		for _, f := range m {
			name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".pid"), ".active")
			running[name] = true
		}
	}
	for _, paths := range []bool{true, false} {
		for name := range running {
			if strings.HasSuffix(name, ".path") == paths {
				unlock := lockUnit(name)
				stop(name)
				unlock()
			}
		}
	}
	if rc := daemonReload(); rc != 0 {
		return rc
	}
	return bootUnits()
}

// bootUnits starts what a boot starts (test worlds only): every unit of
// the host's own a target wants or requires, as systemd runs a boot's
// start jobs: each once the units it is ordered after (its After=, their
// Before=) have started, the others side by side, so that a unit slow to
// start holds up only those ordered after it. A path unit is ordered as
// the service it starts.
func bootUnits() int {
	wanted := map[string]bool{}
	for _, pattern := range []string{"*.target.wants/*", "*.target.requires/*"} {
		m, _ := filepath.Glob(filepath.Join(systemDir, pattern))
		for _, l := range m {
			// Only the host's own units (written to /etc/systemd/system,
			// as Kedge and Typhoon write theirs), not the machine's
			// packaged ones the test host's /etc also shows.
			if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, systemDir+"/") {
				wanted[filepath.Base(l)] = true
			}
		}
	}
	units := map[string]*unit{}
	for name := range wanted {
		if u, err := loadUnit(name); err == nil {
			units[name] = u
		}
		if u := units[name]; u != nil && u.Trigger != "" {
			if t, err := loadUnit(u.Trigger); err == nil {
				units[u.Trigger] = t
			}
		}
	}
	after := bootOrder(wanted, units)
	self, err := os.Executable()
	if err != nil {
		return fail("%v", err)
	}
	started := map[string]chan struct{}{}
	for name := range wanted {
		started[name] = make(chan struct{})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	rc := 0
	for name := range wanted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(started[name])
			for _, d := range after[name] {
				<-started[d]
			}
			// A process of its own: one start job.
			cmd := exec.Command(self, "__boot-start", name)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				mu.Lock()
				rc = 1
				// What the unit's processes said last, for whoever
				// reads why the boot failed (the harness's error).
				fmt.Fprintf(os.Stderr, "%s's log ends:\n%s\n", name, logTail(name, 20))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return rc
}

// logTail is the last n lines of the unit's log.
func logTail(name string, n int) string {
	b, _ := os.ReadFile(logFile(name))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// bootOrder is, for each wanted unit, the wanted units it starts after:
// those its After= names and those whose Before= names it (a path unit's
// are its service's). Units in an ordering cycle lose their ordering, as
// systemd drops a job to break one.
func bootOrder(wanted map[string]bool, units map[string]*unit) map[string][]string {
	ordering := func(name string) (string, *unit) {
		if u := units[name]; u != nil && u.Trigger != "" && units[u.Trigger] != nil {
			return u.Trigger, units[u.Trigger]
		}
		return name, units[name]
	}
	after := map[string][]string{}
	for a := range wanted {
		as, au := ordering(a)
		if au == nil {
			continue
		}
		for b := range wanted {
			bu := units[b]
			if b == a || b == as || bu == nil {
				continue
			}
			if slices.Contains(au.After, b) || slices.Contains(bu.Before, as) {
				after[a] = append(after[a], b)
			}
		}
		sort.Strings(after[a])
	}
	// Kahn's algorithm: what is left is in a cycle.
	waiting := map[string]int{}
	next := map[string][]string{}
	for a, deps := range after {
		waiting[a] = len(deps)
		for _, b := range deps {
			next[b] = append(next[b], a)
		}
	}
	var ready []string
	for name := range wanted {
		if waiting[name] == 0 {
			ready = append(ready, name)
		}
	}
	for len(ready) > 0 {
		n := ready[0]
		ready = ready[1:]
		for _, a := range next[n] {
			if waiting[a]--; waiting[a] == 0 {
				ready = append(ready, a)
			}
		}
	}
	for name, w := range waiting {
		if w > 0 {
			fmt.Fprintf(os.Stderr, "%s: ordering cycle, started without its ordering\n", name)
			delete(after, name)
		}
	}
	return after
}
