package pglab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options configure a server.
type Options struct {
	// Dir holds data, socket and log: a new directory under the system's
	// temp directory when empty (the unprivileged server must reach it,
	// and a test's own temp directory is its owner's alone). Close removes
	// a directory it made.
	Dir      string
	Host     string // loopback address to listen on (default 127.0.0.1)
	Port     int    // default 5432
	User     string // the superuser made by initdb (default temporal)
	Password string // its password (scram-sha-256 over TCP)
}

// Server is a PostgreSQL server.
type Server struct {
	opts Options
	made bool // Close removes opts.Dir
	bin  string
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan struct{}
}

// Bin finds PostgreSQL's programs: $KEDGE_PG_BIN, else Debian's newest
// /usr/lib/postgresql/N/bin.
func Bin() (string, error) {
	if d := os.Getenv("KEDGE_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL (initdb under /usr/lib/postgresql/*/bin): run scripts/deps.sh")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start makes a database cluster in o.Dir and starts the server.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 5432
	}
	if o.User == "" {
		o.User = "temporal"
	}
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, bin: bin}
	// PostgreSQL will not run as root: as root, run it as nobody.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "kedge-pg-"); err != nil {
			return nil, err
		}
		s.opts.Dir, s.made = o.Dir, true
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	pw := filepath.Join(o.Dir, "pwfile")
	if err := os.WriteFile(pw, []byte(o.Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	for _, d := range []string{o.Dir, s.dataDir(), s.sockDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if s.cred != nil {
		for _, p := range []string{o.Dir, s.dataDir(), s.sockDir(), pw} {
			if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	initdb := s.command(ctx, "initdb", "-D", s.dataDir(), "-U", o.User, "--pwfile", pw,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	_ = os.Remove(pw)
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.opts.Dir, "data") }
func (s *Server) sockDir() string { return filepath.Join(s.opts.Dir, "sock") }

// Address is host:port.
func (s *Server) Address() string { return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)) }

// Host and Port are where the server listens.
func (s *Server) Host() string { return s.opts.Host }

// Port is the TCP port.
func (s *Server) Port() int { return s.opts.Port }

func (s *Server) command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, prog), args...)
	cmd.Dir = s.opts.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	return cmd
}

// Start (re)starts the server on its data and waits until it accepts
// connections.
func (s *Server) Start(ctx context.Context) error {
	// A start right after a crash can find the crashed server's shared
	// memory still attached by one of its processes that outlived the
	// group kill (a backend being forked as the signal went out): then
	// PostgreSQL refuses to start, and the start is tried again until that
	// process is gone, within the same minute.
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.start(ctx, deadline)
		if err == nil || !errors.Is(err, errShmInUse) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errShmInUse is PostgreSQL refusing to start beside a crashed server's
// shared memory that a process still holds.
var errShmInUse = errors.New("the shared memory of the server before is still in use")

func (s *Server) start(ctx context.Context, deadline time.Time) error {
	logPath := filepath.Join(s.opts.Dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	before, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	// fsync off keeps a two-core machine's disk out of the way and
	// loses nothing when PostgreSQL itself is killed (the kernel keeps
	// what it was given). Commits stay synchronous: with
	// synchronous_commit=off a kill -9 loses transactions already
	// reported committed, and Temporal, which trusts its database, is
	// left with state the database no longer has (a workflow stuck on
	// "DBRecordVersion expected: 6, actually 5" in the chaos runs).
	cmd := s.command(context.Background(), "postgres", "-D", s.dataDir(), "-k", s.sockDir(),
		"-h", s.opts.Host, "-p", strconv.Itoa(s.opts.Port), "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	// Ready is accepting connections, as PostgreSQL's own pg_isready says:
	// after a crash it listens while it recovers, refusing sessions until
	// its recovery is consistent.
	for {
		ready := exec.CommandContext(ctx, filepath.Join(s.bin, "pg_isready"), "-q", "-h", s.opts.Host, "-p", strconv.Itoa(s.opts.Port), "-t", "1")
		ready.Env = []string{"PATH=/usr/bin:/bin"}
		if ready.Run() == nil {
			return nil
		}
		select {
		case <-s.done:
			// third-party message: PostgreSQL says so in its log only.
			if logged, _ := os.ReadFile(logPath); int64(len(logged)) > before && strings.Contains(string(logged[before:]), "pre-existing shared memory block") {
				return errShmInUse
			}
			return fmt.Errorf("postgres exited at start; see %s", logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections on %s within a minute", s.Address())
		}
	}
}

// Stop shuts the server down (fast shutdown: sessions are ended).
func (s *Server) Stop() error {
	return s.signal(syscall.SIGINT)
}

// Kill kills the server and its backends at once (kill -9), as a crash.
func (s *Server) Kill() error {
	return s.signal(syscall.SIGKILL)
}

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	// The whole process group: postmaster and backends.
	_ = syscall.Kill(-s.cmd.Process.Pid, sig)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	// The backends outlive the postmaster for a moment, attached to its
	// shared memory; a start before they are gone is refused ("pre-existing
	// shared memory block is still in use"). Wait until the process group
	// is empty. A killed postmaster leaves its pid file; the next start
	// sees that pid gone, so there is nothing else to clean.
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(-s.cmd.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres's processes (group %d) still run 30s after %s", s.cmd.Process.Pid, sig)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Close stops the server and removes the directory it made.
func (s *Server) Close() error {
	err := s.Stop()
	if s.made {
		if rerr := os.RemoveAll(s.opts.Dir); err == nil {
			err = rerr
		}
	}
	return err
}

// Logs returns the server's log.
func (s *Server) Logs() string {
	b, _ := os.ReadFile(filepath.Join(s.opts.Dir, "postgres.log"))
	return strings.TrimSpace(string(b))
}

// SQL runs one query with psql over TCP as the superuser, with password,
// and returns its unaligned output.
func (s *Server) SQL(ctx context.Context, password, db, query string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "psql"), "-h", s.opts.Host, "-p", strconv.Itoa(s.opts.Port),
		"-U", s.opts.User, "-d", db, "-v", "ON_ERROR_STOP=1", "-At", "-c", query)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "PGPASSWORD=" + password, "PGCONNECT_TIMEOUT=5"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
