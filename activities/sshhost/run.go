package sshhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/activities/sshpool"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/target"
)

const (
	defaultOutputLimit = 64 << 10
	// maxOutputsBytes bounds what a command may write to $KEDGE_OUTPUT;
	// results travel in Temporal payloads (2 MiB at most).
	maxOutputsBytes = 256 << 10
	// killGrace is how long a cancelled command has between SIGTERM and
	// SIGKILL.
	killGrace = 5 * time.Second
)

// Run runs a command or a script on the host (host.run).
func (a *Activities) Run(ctx context.Context, in host.RunInput) (host.RunResult, error) {
	res, err := a.run(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) run(ctx context.Context, in host.RunInput) (host.RunResult, error) {
	if (in.Command == "") == (in.Script == "") {
		return host.RunResult{}, invalid("host.run needs exactly one of command and script")
	}
	if strings.ContainsRune(in.Command, 0) || strings.ContainsRune(in.Script, 0) {
		return host.RunResult{}, invalid("command and script cannot hold NUL bytes")
	}
	var timeout time.Duration
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			return host.RunResult{}, invalid(fmt.Sprintf("timeout %q is not a positive duration", in.Timeout))
		}
		timeout = d
	}
	env, err := exports(in.Env)
	if err != nil {
		return host.RunResult{}, err
	}
	limit := in.OutputLimit
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	start := time.Now()
	res, err := a.exec(ctx, in.Target, execSpec{
		env: env, command: in.Command, script: in.Script, timeout: timeout, limit: limit,
		details: func(stdout, stderr *tailBuffer) any {
			return map[string]any{"elapsed": time.Since(start).Round(time.Second).String(), "stdoutBytes": stdout.total(), "stderrBytes": stderr.total()}
		},
	})
	if err != nil {
		return res, err
	}
	accept := in.AcceptExitCodes
	if len(accept) == 0 {
		accept = []int{0}
	}
	if !slices.Contains(accept, res.ExitCode) {
		return res, &typedError{
			typ:     errtype.CommandFailed,
			msg:     fmt.Sprintf("exit status %d on %s%s", res.ExitCode, in.Target.Name(), tailLine(res.Stderr)),
			details: []any{res.ExitCode},
		}
	}
	return res, nil
}

// exports renders env as export lines, values shell-quoted. Names are
// checked; values are never logged.
func exports(env map[string]string) (string, error) {
	keys := make([]string, 0, len(env))
	for k, v := range env {
		if err := host.CheckEnvName(k); err != nil {
			return "", invalid(err.Error())
		}
		if strings.ContainsRune(v, 0) {
			return "", invalid(fmt.Sprintf("env %s holds a NUL byte", k))
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("export ")
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(quote(env[k]))
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// tailLine is ": <last lines of stderr>" for error messages.
func tailLine(stderr string) string {
	s := strings.TrimSpace(stderr)
	if s == "" {
		return ""
	}
	if len(s) > 512 {
		s = "..." + s[len(s)-512:]
	}
	return ": " + s
}

// quote makes s one shell word.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// execSpec is one remote command run by exec: exactly one of command
// (run with sh -c) and script (fed to sh -s).
type execSpec struct {
	env     string // export lines
	command string
	script  string
	timeout time.Duration // 0: none beyond ctx
	limit   int           // bytes of stdout and of stderr kept
	// details are the heartbeat details.
	details func(stdout, stderr *tailBuffer) any
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// wrapper is the script fed on stdin to `sh -s` for one exec, as one
// brace group, so the shell has read all of it before it runs any: the
// rest of stdin is the watchdog's. It names a fresh $KEDGE_OUTPUT
// (created by the command if it writes outputs), exports env, runs the
// command in a background subshell (eval of the quoted command or
// script, stdin from /dev/null) and waits for it, so a signal to the
// wrapper runs its trap at once: the trap signals the wrapper's process
// group, SIGTERM then SIGKILL after a grace period. sshd makes every
// session a process group of its own; the wrapper is in it, under sudo
// or not (sudo runs its command in its own group), so the group is the
// session's processes and nothing else. It is read from /proc/$$/stat
// rather than made with setsid, which would cost another exec.
//
// The watchdog stops the command the same way when its stdin ends: exec
// keeps stdin open while the command runs and closes it to cancel, and
// sshd closes it when the connection goes (a killed worker, a dead
// network). Without it the command would run on unseen, and the step's
// retry beside it. sshd may refuse signal requests, so closing stdin is
// also how a cancel reaches the wrapper.
//
// This is on every step's path: besides the command, the wrapper starts
// only the watchdog, a subshell that runs no program (and, when the
// command wrote outputs, rm). (A subshell running eval behaves as sh -c
// for the command; only $0 differs.)
func wrapper(spec execSpec, outFile, boundary string) string {
	body := spec.command
	if spec.script != "" {
		body = spec.script
	}
	var b strings.Builder
	b.Grow(len(spec.env) + len(body) + 1024)
	b.WriteString(`{
KEDGE_OUTPUT=` + outputPath(outFile) + `
export KEDGE_OUTPUT
`)
	b.WriteString(spec.env)
	b.WriteString(`kedge_pid=
kedge_watch=
kedge_group=$$
{ read -r _ _ _ _ kedge_group _ </proc/$$/stat; } 2>/dev/null
case $kedge_group in ''|*[!0-9]*|0|1) kedge_group=$$ ;; esac
kedge_stop() {
  [ -n "$kedge_pid" ] || { kedge_stopped=1; return; }
  trap '' TERM HUP INT
  [ -z "$kedge_watch" ] || kill $kedge_watch 2>/dev/null
  kill -TERM -$kedge_group 2>/dev/null || kill -TERM $kedge_pid 2>/dev/null
  (sleep ` + fmt.Sprint(int(killGrace.Seconds())) + `; kill -KILL -$kedge_group 2>/dev/null || kill -KILL $kedge_pid) </dev/null >/dev/null 2>&1 &
}
trap kedge_stop TERM HUP INT
exec 9<&0
(eval ` + quote(body) + `) </dev/null 9<&- &
kedge_pid=$!
[ -z "$kedge_stopped" ] || kedge_stop
( while IFS= read -r _; do :; done; kill -TERM $$ ) <&9 >/dev/null 2>&1 &
kedge_watch=$!
exec 9<&-
while :; do wait $kedge_pid; kedge_rc=$?; kill -0 $kedge_pid 2>/dev/null || break; done
kill $kedge_watch 2>/dev/null
printf '\n%s\n' ` + boundary + ` >&2
if [ -e "$KEDGE_OUTPUT" ]; then
  while IFS= read -r kedge_line || [ -n "$kedge_line" ]; do printf '%s\n' "$kedge_line"; done <"$KEDGE_OUTPUT" >&2
  rm -f "$KEDGE_OUTPUT" </dev/null >/dev/null 2>&1 &
fi
exit $kedge_rc
}
`)
	return b.String()
}

// exec runs spec on the host in one session. A timeout or a cancelled ctx
// stops the remote command (SIGTERM to its process group, SIGKILL after
// a grace period, then the session is closed).
func (a *Activities) exec(ctx context.Context, t target.SSH, spec execSpec) (host.RunResult, error) {
	boundary := "KEDGE_OUTPUTS_" + randomHex(12)
	outFile := randomHex(12)
	script := wrapper(spec, outFile, boundary)
	if spec.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.timeout)
		defer cancel()
	}
	sess, release, err := a.Pool.Session(ctx, t)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && spec.timeout > 0 && ctx.Err() != nil {
			return host.RunResult{}, &typedError{typ: errtype.CommandTimeout, msg: fmt.Sprintf("command on %s timed out after %s before it started: %v", t.Name(), spec.timeout, err)}
		}
		return host.RunResult{}, err
	}
	defer release()
	stdout := &tailBuffer{limit: spec.limit}
	stderr := newSplitter("\n"+boundary+"\n", spec.limit, maxOutputsBytes)
	stdin, err := sess.StdinPipe()
	if err != nil {
		return host.RunResult{}, fmt.Errorf("command on %s: %w", t.Name(), err)
	}
	sess.Stdout, sess.Stderr = stdout, stderr
	if spec.details != nil {
		stop := a.heartbeat(ctx, func() any { return spec.details(stdout, stderr.before) })
		defer stop()
	}
	if err := sess.Start(wrapperCommand(t)); err != nil {
		return host.RunResult{}, a.Pool.Lost(t, fmt.Errorf("start command on %s: %w", t.Name(), err))
	}
	// The script, then nothing until the command is to stop: stdin stays
	// open, the watchdog's line to this side (see wrapper).
	go func() { _, _ = io.WriteString(stdin, script) }()
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		stopRemote(sess, stdin, done)
		_ = sess.Close()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && spec.timeout > 0 {
			return host.RunResult{}, &typedError{typ: errtype.CommandTimeout,
				msg: fmt.Sprintf("command on %s timed out after %s and was killed%s", t.Name(), spec.timeout, tailLine(stderr.before.String()))}
		}
		return host.RunResult{}, fmt.Errorf("command on %s: %w", t.Name(), ctx.Err())
	}
	stderr.flush()
	res := host.RunResult{
		Stdout: stdout.String(), StdoutTruncated: stdout.truncated(),
		Stderr: stderr.before.String(), StderrTruncated: stderr.before.truncated(),
	}
	var exit *ssh.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exit):
		res.ExitCode = exit.ExitStatus()
	default:
		var missing *ssh.ExitMissingError
		if errors.As(waitErr, &missing) {
			return res, fmt.Errorf("command on %s ended without an exit status: %w", t.Name(), sshpool.ErrConnectionLost)
		}
		return res, a.Pool.Lost(t, fmt.Errorf("command on %s: %w", t.Name(), waitErr))
	}
	if !stderr.found {
		// The wrapper did not reach its end: sudo refused to run it, it
		// was killed, or sh is missing. Report what there is.
		if err := sshpool.AsPrivilegeError(t, res.Stderr); err != nil {
			return res, err
		}
		if waitErr == nil {
			return res, fmt.Errorf("command on %s ended without reporting: %w", t.Name(), sshpool.ErrConnectionLost)
		}
		return res, nil
	}
	if stderr.overflow {
		return res, &typedError{typ: errtype.CommandFailed, nonRetryable: true,
			msg: fmt.Sprintf("command on %s wrote more than %d bytes to $KEDGE_OUTPUT", t.Name(), maxOutputsBytes)}
	}
	res.Outputs = parseOutputs(stderr.after.String())
	return res, nil
}

// wrapperCommand starts the shell that reads the wrapper, through sudo
// when t becomes root: one exec besides sudo's own. sshd makes the
// session's first process (the shell, or sudo) the leader of a process
// group of its own, which the wrapper signals as a whole.
func wrapperCommand(t target.SSH) string {
	return "exec " + sshpool.Privileged(t, "sh -s")
}

// outputPath is the shell word for the $KEDGE_OUTPUT of one exec.
func outputPath(outFile string) string {
	return `"${TMPDIR:-/tmp}/.kedge-out-` + outFile + `"`
}

// stopRemote stops a running wrapper and waits, at most the kill grace
// and a little more, for its session to end. It closes the wrapper's
// stdin, which its watchdog reads (see wrapper), and asks sshd to signal
// the session too, which sshd may refuse (OpenSSH denies signal requests
// on many builds). The wrapper's trap then stops the command's whole
// process group.
func stopRemote(sess *ssh.Session, stdin io.Closer, done <-chan error) {
	_ = stdin.Close()
	_ = sess.Signal(ssh.SIGTERM)
	select {
	case <-done:
	case <-time.After(killGrace + 2*time.Second):
	}
}

// parseOutputs reads key=value lines and, as GitHub Actions does,
// multi-line values written as
//
//	key<<DELIMITER
//	line 1
//	line 2
//	DELIMITER
func parseOutputs(s string) map[string]string {
	var out map[string]string
	set := func(k, v string) {
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		eq := strings.IndexByte(line, '=')
		hd := strings.Index(line, "<<")
		if hd > 0 && (eq < 0 || hd < eq) {
			k, delim := strings.TrimSpace(line[:hd]), line[hd+2:]
			if delim == "" {
				continue
			}
			var val []string
			j := i + 1
			for ; j < len(lines) && lines[j] != delim; j++ {
				val = append(val, lines[j])
			}
			if j == len(lines) {
				continue // no closing delimiter: ignore the opener
			}
			set(k, strings.Join(val, "\n"))
			i = j
			continue
		}
		if eq <= 0 {
			continue
		}
		if k := strings.TrimSpace(line[:eq]); k != "" {
			set(k, line[eq+1:])
		}
	}
	return out
}

// splitter is the stderr of an exec: what comes before the boundary is
// the command's stderr (tail kept), what comes after is the outputs file.
type splitter struct {
	marker   []byte
	pending  []byte // not yet committed: may be the start of the marker
	before   *tailBuffer
	after    bytes.Buffer
	maxAfter int
	found    bool
	overflow bool
}

func newSplitter(marker string, limit, maxAfter int) *splitter {
	return &splitter{marker: []byte(marker), before: &tailBuffer{limit: limit}, maxAfter: maxAfter}
}

// Write is called from one goroutine (the session's stderr copier).
func (s *splitter) Write(p []byte) (int, error) {
	n := len(p)
	if s.found {
		s.keep(p)
		return n, nil
	}
	s.pending = append(s.pending, p...)
	if i := bytes.Index(s.pending, s.marker); i >= 0 {
		_, _ = s.before.Write(s.pending[:i])
		s.found = true
		s.keep(s.pending[i+len(s.marker):])
		s.pending = nil
		return n, nil
	}
	if keep := len(s.marker) - 1; len(s.pending) > keep {
		cut := len(s.pending) - keep
		_, _ = s.before.Write(s.pending[:cut])
		s.pending = append(s.pending[:0], s.pending[cut:]...)
	}
	return n, nil
}

func (s *splitter) keep(p []byte) {
	if s.after.Len()+len(p) > s.maxAfter {
		s.overflow = true
		p = p[:max(0, s.maxAfter-s.after.Len())]
	}
	s.after.Write(p)
}

// flush commits what is pending once the stream has ended.
func (s *splitter) flush() {
	if !s.found && len(s.pending) > 0 {
		_, _ = s.before.Write(s.pending)
		s.pending = nil
	}
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
	n     int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += len(p)
	if len(p) >= b.limit {
		b.buf = append(b.buf[:0], p[len(p)-b.limit:]...)
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) > b.limit {
		return string(b.buf[len(b.buf)-b.limit:])
	}
	return string(b.buf)
}

func (b *tailBuffer) truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n > b.limit
}

func (b *tailBuffer) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// lastLine is the last complete non-empty line written so far.
func (b *tailBuffer) lastLine() string {
	s := strings.TrimRight(b.String(), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
