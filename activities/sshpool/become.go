package sshpool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"kedge.dev/kedge/actions/target"
	"strings"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// ErrPrivilege is a login user that cannot become root as the target asks
// (sudo missing, or sudo wanting a password). Retrying cannot fix it.
var ErrPrivilege = errors.New("privilege escalation failed")

// PrivilegeError says which host and user could not become root, and why.
// It wraps ErrPrivilege.
type PrivilegeError struct {
	Node, Address, User string
	// Reason is what sudo said (or that it is missing).
	Reason string
}

func (e *PrivilegeError) Error() string {
	return fmt.Sprintf("%s (%s): user %s cannot run commands as root through sudo -n: %s; give %s passwordless sudo (a NOPASSWD sudoers rule) or log in as a user that has it",
		e.Node, e.Address, e.User, e.Reason, e.User)
}

func (e *PrivilegeError) Unwrap() error { return ErrPrivilege }

// Privileged is the command line that runs argv (words, no shell syntax
// beyond what argv itself holds) as root on t: through `sudo -n --` when t
// asks to become root, as it is otherwise.
func Privileged(t target.SSH, argv string) string {
	if t.Become == target.BecomeSudo {
		return "sudo -n -- " + argv
	}
	return argv
}

// becomeProbe checks sudo without a prompt and says who the command ends
// up running as.
const becomeProbe = `command -v sudo >/dev/null 2>&1 || { echo 'sudo is not installed' >&2; exit 126; }
exec sudo -n -- id -u`

// sftpServerCommand starts the host's SFTP server as root: the binary
// sshd's own Subsystem line names, else the first of the places
// distributions install it (Debian, Fedora and its CoreOS, Arch,
// Flatcar/Gentoo).
const sftpServerCommand = `p=$(sed -n 's/^[[:space:]]*[Ss]ubsystem[[:space:]][[:space:]]*sftp[[:space:]][[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/ssh/sshd_config 2>/dev/null | head -n 1)
for s in "$p" /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/lib/ssh/sftp-server /usr/lib64/misc/sftp-server /usr/lib/misc/sftp-server /usr/libexec/sftp-server; do
  case $s in /*) [ -x "$s" ] && exec sudo -n -- "$s" ;; esac
done
echo 'no sftp-server program found on this host' >&2
exit 127`

// becomeState is the outcome of a connection's one sudo check.
type becomeState struct {
	mu   sync.Mutex
	done bool
	err  error
}

// CheckBecome checks afresh, on the pooled connection to t, that t's user
// becomes root as t asks (nothing to check when it asks for nothing), and
// remembers the answer for the connection. A refusal wraps ErrPrivilege.
func (p *Pool) CheckBecome(ctx context.Context, t target.SSH) error {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, t)
		if err != nil {
			return err
		}
		c.become.mu.Lock()
		c.become.done = false
		c.become.mu.Unlock()
		err = c.checkBecome(ctx)
		if err == nil || errors.Is(err, ErrPrivilege) || ctx.Err() != nil || attempt > 0 {
			return err
		}
		p.evict(c, "sudo check failed: "+err.Error())
	}
}

// AsPrivilegeError reads what a command run through Privileged wrote to
// stderr when it never started: sudo's own refusal becomes a
// PrivilegeError; anything else gives nil.
func AsPrivilegeError(t target.SSH, stderr string) error {
	if t.Become != target.BecomeSudo {
		return nil
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(line, "sudo: ") {
			return &PrivilegeError{Node: t.Name(), Address: hostPort(t), User: user(t), Reason: line}
		}
	}
	return nil
}

// checkBecome runs the sudo check once per connection. A transport error
// is not remembered (the caller redials); a refusal is.
func (c *Conn) checkBecome(ctx context.Context) error {
	if c.Target.Become == "" {
		return nil
	}
	c.become.mu.Lock()
	defer c.become.mu.Unlock()
	if c.become.done {
		return c.become.err
	}
	s, release, err := c.Session(ctx)
	if err != nil {
		return err
	}
	defer release()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	err = s.Run(becomeProbe)
	var exit *ssh.ExitError
	switch {
	case err == nil && strings.TrimSpace(stdout.String()) == "0":
		c.become.done, c.become.err = true, nil
	case err == nil:
		c.become.done = true
		c.become.err = c.privilegeError(fmt.Sprintf("sudo ran the check as uid %s, not root", strings.TrimSpace(stdout.String())))
	case errors.As(err, &exit):
		reason := strings.TrimSpace(stderr.String())
		if reason == "" {
			reason = fmt.Sprintf("sudo exited with status %d", exit.ExitStatus())
		}
		c.become.done = true
		c.become.err = c.privilegeError(lastLine(reason))
	default:
		return err
	}
	return c.become.err
}

func (c *Conn) privilegeError(reason string) error {
	return &PrivilegeError{Node: c.Target.Name(), Address: hostPort(c.Target), User: user(c.Target), Reason: reason}
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// newSFTP opens an SFTP client on the connection: the sftp subsystem as
// the login user, or, when the target becomes root, the host's sftp-server
// program started through sudo in an exec session, so file writes keep
// every property of SFTP (atomic rename, modes, owners) as root.
func (c *Conn) newSFTP() (*sftp.Client, error) {
	opts := []sftp.ClientOption{sftp.UseConcurrentWrites(true)}
	if c.Target.Become == "" {
		cl, err := sftp.NewClient(c.client, opts...)
		if err != nil {
			return nil, err
		}
		return sizePackets(cl), nil
	}
	s, err := c.client.NewSession()
	if err != nil {
		return nil, err
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	stderr := &lockedBuffer{}
	s.Stderr = stderr
	if err := s.Start(sftpServerCommand); err != nil {
		_ = s.Close()
		return nil, err
	}
	cl, err := sftp.NewClientPipe(stdout, stdin, opts...)
	if err != nil {
		_ = s.Close()
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("start sftp-server through sudo: %s: %w", lastLine(msg), ErrConfig)
		}
		return nil, err
	}
	go func() {
		_ = cl.Wait()
		_ = s.Close()
	}()
	return sizePackets(cl), nil
}

// openSSHPacket is the data a read or write carries to OpenSSH's
// sftp-server: the read and write lengths its limits@openssh.com answer
// gives (its 256 KiB message less 1 KiB), which OpenSSH's own sftp and
// scp use with it. A 256 MiB write takes a third less time than in the
// 32 KiB every server must take (make bench's sftp row).
const openSSHPacket = 256<<10 - 1024

// sizePackets has cl read and write in openSSHPacket pieces when the
// server announces limits@openssh.com, as OpenSSH's sftp-server (and
// sshd's internal-sftp) does; any other server keeps pkg/sftp's 32 KiB.
func sizePackets(cl *sftp.Client) *sftp.Client {
	if _, ok := cl.HasExtension(limitsExtension); ok {
		_ = sftp.MaxPacketUnchecked(openSSHPacket)(cl) // a positive size: never an error
	}
	return cl
}

const limitsExtension = "limits@openssh.com"

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 4096 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
