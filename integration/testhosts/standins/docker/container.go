package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"text/template"
	"time"
)

// container is a container's config.json.
type container struct {
	ID         string
	Name       string
	Image      string
	Argv       []string // the process, as the image runs it
	Env        []string
	Volumes    []volume
	Privileged bool
	Remove     bool // --rm
	Hostname   string
	WorkDir    string
	User       string
	Ulimits    []ulimit
	Tmpfs      []string
	LogDriver  string
	// NoNetwork is --network none: the process gets a network namespace
	// of its own with only a loopback device, down.
	NoNetwork bool
	Created   time.Time
}

type volume struct {
	Src, Dst string
	ReadOnly bool
	Shared   bool // shared or rshared propagation (propagation.go)
}

type ulimit struct {
	Name       string
	Soft, Hard uint64
}

func stateDir() string {
	if p := os.Getenv("KEDGE_LAB_CONTAINER_STATE"); p != "" {
		return p
	}
	return "/run/container-standin"
}

func (c *container) dir() string          { return filepath.Join(stateDir(), c.ID) }
func (c *container) file(n string) string { return filepath.Join(c.dir(), n) }

func newID(seed string) string {
	if seed != "" {
		s := sha256.Sum256([]byte(seed))
		return hex.EncodeToString(s[:])
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (c *container) save() error {
	if err := os.MkdirAll(c.dir(), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := c.file("config.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.file("config.json"))
}

func loadContainer(id string) (*container, error) {
	b, err := os.ReadFile(filepath.Join(stateDir(), id, "config.json"))
	if err != nil {
		return nil, err
	}
	c := &container{}
	return c, json.Unmarshal(b, c)
}

// containers lists every container, forgetting those with --rm that have
// ended (the daemon would have removed them).
func containers() []*container {
	entries, _ := os.ReadDir(stateDir())
	var out []*container
	for _, e := range entries {
		c, err := loadContainer(e.Name())
		if err != nil {
			continue
		}
		if c.Remove && c.state() == "exited" {
			_ = os.RemoveAll(c.dir())
			continue
		}
		out = append(out, c)
	}
	return out
}

var errNoSuchContainer = errors.New("no such container")

// lookup finds a container by name, ID or unique ID prefix.
func lookup(ref string) (*container, error) {
	var byPrefix []*container
	for _, c := range containers() {
		if c.Name == ref || c.ID == ref {
			return c, nil
		}
		if len(ref) >= 1 && strings.HasPrefix(c.ID, ref) {
			byPrefix = append(byPrefix, c)
		}
	}
	if len(byPrefix) == 1 {
		return byPrefix[0], nil
	}
	return nil, errNoSuchContainer
}

// pid is the container's process while it runs, else 0.
func (c *container) pid() int {
	b, err := os.ReadFile(c.file("pid"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	if pid <= 0 || startTicks(pid) != f[1] {
		return 0
	}
	return pid
}

// startTicks is a process's start time from /proc/PID/stat, which tells
// it from a later process given the same pid; "" for a gone or zombie one.
func startTicks(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndex(s, ")")
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}

// state is created, running or exited.
func (c *container) state() string {
	if c.pid() > 0 {
		return "running"
	}
	if _, err := os.Stat(c.file("pid")); err == nil {
		return "exited"
	}
	if _, err := os.Stat(c.file("exit")); err == nil {
		return "exited"
	}
	// Being started: a supervisor or client that died before the process
	// started leaves it here for a few seconds at most.
	if time.Since(c.Created) > 30*time.Second {
		return "exited"
	}
	return "created"
}

func (c *container) exitCode() int {
	b, err := os.ReadFile(c.file("exit"))
	if err != nil {
		return 137
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// waitGone waits until the container is no longer running.
func (c *container) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for c.pid() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func ps(args []string) int {
	f, pos, err := psSpec.parse(args)
	if err != nil {
		return usageError("ps", err)
	}
	if len(pos) > 0 {
		return usageError("ps", fmt.Errorf("\"%s ps\" accepts no arguments", prog))
	}
	var tmpl *template.Template
	if format := f.last("format"); format != "" {
		if tmpl, err = template.New("ps").Parse(format + "\n"); err != nil {
			return usageError("ps", fmt.Errorf("template parsing error: %w", err))
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	if tmpl == nil && !f.has("quiet") {
		fmt.Fprintln(w, "CONTAINER ID\tIMAGE\tCOMMAND\tCREATED\tSTATUS\tNAMES")
	}
	for _, c := range containers() {
		state := c.state()
		if state != "running" && !f.has("all") {
			continue
		}
		id := c.ID
		if !f.has("no-trunc") {
			id = id[:12]
		}
		status := "Up"
		if state == "exited" {
			status = fmt.Sprintf("Exited (%d)", c.exitCode())
		} else if state == "created" {
			status = "Created"
		}
		row := struct{ ID, Image, Command, Names, Status, State string }{id, c.Image, strings.Join(c.Argv, " "), c.Name, status, state}
		switch {
		case tmpl != nil:
			if err := tmpl.Execute(os.Stdout, row); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		case f.has("quiet"):
			fmt.Println(id)
		default:
			fmt.Fprintf(w, "%s\t%s\t%q\t%s\t%s\t%s\n", row.ID, row.Image, row.Command, c.Created.Format(time.RFC3339), row.Status, row.Names)
		}
	}
	w.Flush()
	return 0
}

func logs(args []string) int {
	f, pos, err := logsSpec.parse(args)
	if err != nil {
		return usageError("logs", err)
	}
	if len(pos) != 1 {
		return usageError("logs", fmt.Errorf("\"%s logs\" requires exactly 1 argument", prog))
	}
	c, err := lookup(pos[0])
	if err != nil {
		daemonError("No such container: %s", pos[0])
		return 1
	}
	if c.LogDriver == "none" {
		daemonError("configured logging driver does not support reading")
		return 1
	}
	lf, err := os.Open(c.file("log"))
	if err != nil {
		return 0
	}
	defer lf.Close()
	if t := f.last("tail"); t != "" && t != "all" {
		n, err := strconv.Atoi(t)
		if err != nil {
			return usageError("logs", fmt.Errorf("invalid argument %q for \"-n, --tail\" flag", t))
		}
		b, _ := io.ReadAll(lf)
		lines := strings.SplitAfter(string(b), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		fmt.Print(strings.Join(lines, ""))
	}
	for {
		_, _ = io.Copy(os.Stdout, lf)
		if !f.has("follow") {
			return 0
		}
		if c.state() == "exited" {
			_, _ = io.Copy(os.Stdout, lf)
			return 0
		}
		if _, err := os.Stat(c.dir()); err != nil {
			return 0
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stop(args []string) int {
	f, pos, err := stopSpec.parse(args)
	if err != nil {
		return usageError("stop", err)
	}
	if len(pos) == 0 {
		return usageError("stop", fmt.Errorf("\"%s stop\" requires at least 1 argument", prog))
	}
	grace := 10 * time.Second
	for _, k := range []string{"time", "timeout"} {
		if v := f.last(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return usageError("stop", fmt.Errorf("invalid argument %q for \"-t, --%s\" flag", v, k))
			}
			grace = time.Duration(n) * time.Second
		}
	}
	rc := 0
	for _, ref := range pos {
		c, err := lookup(ref)
		if err != nil {
			daemonError("No such container: %s", ref)
			rc = 1
			continue
		}
		c.waitStarted(30 * time.Second)
		if pid := c.pid(); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			if !c.waitGone(grace) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				c.waitGone(5 * time.Second)
			}
		}
		c.waitEnded(5 * time.Second)
		fmt.Println(ref)
	}
	return rc
}

// waitStarted waits while the container is being started: the real
// daemon runs one operation on a container at a time, so a stop that
// arrives during the start stops the started container rather than
// returning while it comes up.
func (c *container) waitStarted(d time.Duration) {
	deadline := time.Now().Add(d)
	for c.state() == "created" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEnded waits until whoever runs the container recorded its end.
func (c *container) waitEnded(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(c.file("exit")); err == nil {
			return
		}
		if _, err := os.Stat(c.dir()); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var signals = map[string]syscall.Signal{
	"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
	"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

func kill(args []string) int {
	f, pos, err := killSpec.parse(args)
	if err != nil {
		return usageError("kill", err)
	}
	if len(pos) == 0 {
		return usageError("kill", fmt.Errorf("\"%s kill\" requires at least 1 argument", prog))
	}
	sig := syscall.SIGKILL
	if s := f.last("signal"); s != "" {
		name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
		if n, err := strconv.Atoi(s); err == nil {
			sig = syscall.Signal(n)
		} else if sig = signals[name]; sig == 0 {
			daemonError("Invalid signal: %s", s)
			return 1
		}
	}
	rc := 0
	for _, ref := range pos {
		c, err := lookup(ref)
		if err != nil {
			daemonError("No such container: %s", ref)
			rc = 1
			continue
		}
		pid := c.pid()
		if pid == 0 {
			daemonError("Cannot kill container: %s: container %s is not running", ref, c.ID)
			rc = 1
			continue
		}
		_ = syscall.Kill(pid, sig)
		fmt.Println(ref)
	}
	return rc
}

func rm(args []string) int {
	f, pos, err := rmSpec.parse(args)
	if err != nil {
		return usageError("rm", err)
	}
	if len(pos) == 0 {
		return usageError("rm", fmt.Errorf("\"%s rm\" requires at least 1 argument", prog))
	}
	rc := 0
	for _, ref := range pos {
		c, err := lookup(ref)
		if err != nil {
			if f.has("force") || f.has("ignore") {
				continue
			}
			daemonError("No such container: %s", ref)
			rc = 1
			continue
		}
		c.waitStarted(30 * time.Second)
		if pid := c.pid(); pid > 0 {
			if !f.has("force") {
				daemonError("cannot remove container \"/%s\": container is running: stop the container before removing or force remove", c.Name)
				rc = 1
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			c.waitGone(10 * time.Second)
			c.waitEnded(5 * time.Second)
		}
		_ = os.RemoveAll(c.dir())
		fmt.Println(ref)
	}
	return rc
}
