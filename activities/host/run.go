package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"kedge.dev/kedge/activities/sshpool"
)

const defaultOutputLimit = 64 << 10

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Run runs a command or a script on the host (host.run).
func (a *Activities) Run(ctx context.Context, in RunInput) (RunResult, error) {
	res, err := a.run(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) run(ctx context.Context, in RunInput) (RunResult, error) {
	if (in.Command == "") == (in.Script == "") {
		return RunResult{}, invalid("host.run needs exactly one of command and script")
	}
	var timeout time.Duration
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			return RunResult{}, invalid(fmt.Sprintf("timeout %q is not a positive duration", in.Timeout))
		}
		timeout = d
	}
	keys := make([]string, 0, len(in.Env))
	for k := range in.Env {
		if !envNameRE.MatchString(k) {
			return RunResult{}, invalid(fmt.Sprintf("env name %q is not a valid variable name", k))
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var env strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&env, "export %s=%s\n", k, quote(in.Env[k]))
	}
	inner := "sh -c " + quote(in.Command)
	var stdin io.Reader
	if in.Script != "" {
		inner = "sh -s"
		stdin = strings.NewReader(in.Script)
	}
	limit := in.OutputLimit
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	res, err := a.exec(ctx, in.Target, env.String(), inner, stdin, timeout, limit)
	if err != nil {
		return res, err
	}
	accept := in.AcceptExitCodes
	if len(accept) == 0 {
		accept = []int{0}
	}
	if !slices.Contains(accept, res.ExitCode) {
		return res, &typedError{
			typ:     ErrTypeCommandFailed,
			msg:     fmt.Sprintf("exit status %d on %s%s", res.ExitCode, in.Target.Node, tailLine(res.Stderr)),
			details: []any{res.ExitCode},
		}
	}
	return res, nil
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

// exec runs `inner` under a wrapper that provides $KEDGE_OUTPUT, runs the
// command in its own session (setsid), so cancelling kills all of it, and
// reports the outputs after a random boundary on stderr — all in one SSH
// session.
func (a *Activities) exec(ctx context.Context, t sshpool.Target, env, inner string, stdin io.Reader, timeout time.Duration, limit int) (RunResult, error) {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	boundary := "KEDGE-OUTPUTS-" + hex.EncodeToString(b)
	// The wrapper spawns as little as it can: it is on every step's path.
	wrapper := `KEDGE_OUTPUT="${TMPDIR:-/tmp}/.kedge-out-` + boundary + `"
set -C; : > "$KEDGE_OUTPUT" || exit 125; set +C
export KEDGE_OUTPUT
` + env + `exec 3<&0
kedge_setsid=; command -v setsid >/dev/null 2>&1 && kedge_setsid=setsid
$kedge_setsid ` + inner + ` <&3 3<&- &
kedge_pid=$!
exec 3<&-
trap 'kill -TERM -$kedge_pid 2>/dev/null || kill -TERM $kedge_pid 2>/dev/null; sleep 2; kill -KILL -$kedge_pid 2>/dev/null' TERM HUP INT
while :; do wait $kedge_pid; kedge_rc=$?; kill -0 $kedge_pid 2>/dev/null || break; done
printf '\n%s\n' ` + quote(boundary) + ` >&2
while IFS= read -r kedge_line || [ -n "$kedge_line" ]; do printf '%s\n' "$kedge_line" >&2; done < "$KEDGE_OUTPUT"
rm -f "$KEDGE_OUTPUT"
exit $kedge_rc
`
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	sess, release, err := a.Pool.Session(ctx, t)
	if err != nil {
		return RunResult{}, err
	}
	defer release()
	stdout := &tailBuffer{limit: limit}
	stderr := &tailBuffer{limit: limit + 64<<10}
	sess.Stdin, sess.Stdout, sess.Stderr = stdin, stdout, stderr
	stop := a.heartbeat(ctx, func() any { return map[string]int{"stdoutBytes": stdout.total(), "stderrBytes": stderr.total()} })
	defer stop()
	if err := sess.Start("sh -c " + quote(wrapper)); err != nil {
		return RunResult{}, a.Pool.Lost(t, err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		_ = sess.Signal(ssh.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		_ = sess.Close()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return RunResult{}, &typedError{typ: ErrTypeCommandTimeout, msg: fmt.Sprintf("command on %s timed out after %s", t.Node, timeout)}
		}
		return RunResult{}, ctx.Err()
	}
	res := RunResult{Stdout: stdout.String(), StdoutTruncated: stdout.truncated()}
	errText, outputs, found := strings.Cut(stderr.String(), "\n"+boundary+"\n")
	if !found {
		// The wrapper did not reach its end: the connection or the shell died.
		if waitErr == nil {
			waitErr = errors.New("remote command ended without reporting")
		}
		var exit *ssh.ExitError
		if !errors.As(waitErr, &exit) {
			return RunResult{}, a.Pool.Lost(t, waitErr)
		}
		errText = stderr.String()
	}
	res.Stderr, res.StderrTruncated = errText, stderr.truncated()
	res.Outputs = parseOutputs(outputs)
	var exit *ssh.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exit):
		res.ExitCode = exit.ExitStatus()
	default:
		var missing *ssh.ExitMissingError
		if errors.As(waitErr, &missing) {
			return res, fmt.Errorf("command on %s: %v: %w", t.Node, waitErr, sshpool.ErrConnectionLost)
		}
		return res, a.Pool.Lost(t, waitErr)
	}
	return res, nil
}

func parseOutputs(s string) map[string]string {
	var out map[string]string
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
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
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.limit {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) > b.limit {
		return string(bytes.Clone(b.buf[len(b.buf)-b.limit:]))
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
