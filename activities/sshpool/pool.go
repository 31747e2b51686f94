package sshpool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"kedge.dev/kedge/internal/secretfile"

	"kedge.dev/kedge/actions/target"
)

// Options tune a Pool. Zero values take the defaults.
type Options struct {
	// DialTimeout bounds the TCP connect plus the SSH handshake
	// (default 10s).
	DialTimeout time.Duration
	// KeepAliveInterval is how often an open connection is probed with a
	// keepalive@openssh.com request (default 15s).
	KeepAliveInterval time.Duration
	// KeepAliveTimeout is how long a probe may go unanswered before the
	// connection is dropped (default: KeepAliveInterval).
	KeepAliveTimeout time.Duration
	// IdleTimeout closes a connection with no open session whose last
	// session ended (or last SFTP client was handed out) this long ago
	// (default 0: keep it until it dies or the pool is closed). Make it
	// longer than any single SFTP transfer.
	IdleTimeout time.Duration
	// MaxSessions bounds concurrent sessions on one connection; callers
	// beyond it wait. sshd's MaxSessions defaults to 10 and the cached
	// SFTP client holds one more, so the default is 8.
	MaxSessions int
	Logger      *slog.Logger
	// Signers, when set, supplies the client keys for a target (e.g.
	// short-lived certificates from an SSH CA). When it returns signers
	// they replace IdentityFile and the agent; when it returns none and
	// no error, IdentityFile or the agent is used. An error it returns is
	// classified ErrAuthFailed unless it already wraps one of this
	// package's errors (e.g. ErrUnreachable for a CA that is down).
	Signers func(ctx context.Context, t target.SSH) ([]ssh.Signer, error)
}

// Pool hands out shared, verified connections: one per (address, port,
// user, identity, known_hosts, Vault signer) per process.
type Pool struct {
	opts   Options
	mu     sync.Mutex
	conns  map[string]*entry
	closed bool
}

type entry struct {
	ready chan struct{} // closed when dialling ends
	conn  *Conn
	err   error
}

// Conn is one live connection to a host, shared by every caller that
// reaches the same target.
type Conn struct {
	Target target.SSH
	client *ssh.Client
	sem    chan struct{}
	pool   *Pool
	key    string

	mu   sync.Mutex // guards sftp
	sftp *sftp.Client

	become becomeState

	inUse    atomic.Int32
	lastUsed atomic.Int64 // unix nanoseconds

	closed chan struct{}
	once   sync.Once
}

// New makes a pool.
func New(opts Options) *Pool {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.KeepAliveInterval <= 0 {
		opts.KeepAliveInterval = 15 * time.Second
	}
	if opts.KeepAliveTimeout <= 0 {
		opts.KeepAliveTimeout = opts.KeepAliveInterval
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{opts: opts, conns: map[string]*entry{}}
}

func key(t target.SSH) string {
	parts := []string{user(t), t.Address, strconv.Itoa(port(t)), t.IdentityFile, t.KnownHostsFile, t.Become}
	if ca := t.VaultCA; ca != nil {
		// Logged in with another CA role's certificate: not the same
		// credentials.
		parts = append(parts, ca.Address, ca.Mount, ca.Role, ca.TokenFile, ca.CAFile)
	}
	return strings.Join(parts, "\x00")
}

func port(t target.SSH) int { return t.PortOrDefault() }

func user(t target.SSH) string { return t.UserOrDefault() }

func hostPort(t target.SSH) string { return net.JoinHostPort(t.Address, strconv.Itoa(port(t))) }

// Get returns the pooled connection to t, dialling it when there is none.
// Callers asking at once share one dial; a caller that gives up (its ctx
// ends) does not fail the dial for the others.
func (p *Pool) Get(ctx context.Context, t target.SSH) (*Conn, error) {
	k := key(t)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: ssh pool is closed: %w", t.Name(), ErrConnectionLost)
	}
	e, ok := p.conns[k]
	if !ok {
		e = &entry{ready: make(chan struct{})}
		p.conns[k] = e
		go p.dialEntry(context.WithoutCancel(ctx), t, k, e)
	}
	p.mu.Unlock()
	select {
	case <-e.ready:
		return e.conn, e.err
	default:
	}
	select {
	case <-e.ready:
		return e.conn, e.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s (%s): gave up waiting for the connection: %w: %w", t.Name(), hostPort(t), ctx.Err(), ErrUnreachable)
	}
}

func (p *Pool) dialEntry(ctx context.Context, t target.SSH, k string, e *entry) {
	c, err := p.dial(ctx, t, k)
	p.mu.Lock()
	closed := p.closed
	if err != nil || closed {
		if p.conns[k] == e {
			delete(p.conns, k)
		}
	}
	p.mu.Unlock()
	if err == nil && closed {
		c.close()
		c, err = nil, fmt.Errorf("%s: ssh pool is closed: %w", t.Name(), ErrConnectionLost)
	}
	e.conn, e.err = c, err
	close(e.ready)
	if err == nil {
		go c.watch(p.opts)
	}
}

// evict drops c from the pool (if it is still the pooled one) and closes
// it. Sessions open on it end.
func (p *Pool) evict(c *Conn, why string) {
	p.mu.Lock()
	if e, ok := p.conns[c.key]; ok && e.conn == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
	select {
	case <-c.closed:
	default:
		p.opts.Logger.Info("ssh connection dropped", "node", c.Target.Name(), "address", hostPort(c.Target), "reason", why)
	}
	c.close()
}

// Close closes every connection. Dials under way are closed when they
// finish; Get fails afterwards.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*entry{}
	p.closed = true
	p.mu.Unlock()
	for _, e := range conns {
		select {
		case <-e.ready:
			if e.conn != nil {
				e.conn.close()
			}
		default: // dialEntry sees p.closed and closes it
		}
	}
	return nil
}

func (p *Pool) dial(ctx context.Context, t target.SSH, k string) (*Conn, error) {
	if t.Address == "" {
		return nil, fmt.Errorf("%s: no address: %w", t.Name(), ErrConfig)
	}
	if t.KnownHostsFile == "" {
		return nil, fmt.Errorf("%s: no known_hosts file (host keys are always verified): %w", t.Name(), ErrConfig)
	}
	hostKeys, known, err := hostKeyCallback(t)
	if err != nil {
		return nil, err
	}
	auth, done, err := p.auth(ctx, t)
	if err != nil {
		return nil, err
	}
	defer done()
	cfg := &ssh.ClientConfig{
		User:              user(t),
		Auth:              auth,
		HostKeyCallback:   hostKeys,
		HostKeyAlgorithms: hostKeyAlgorithms(known),
		Timeout:           p.opts.DialTimeout,
	}
	dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(dctx, "tcp", hostPort(t))
	if err != nil {
		return nil, fmt.Errorf("dial %s (%s): %v: %w", t.Name(), hostPort(t), err, ErrUnreachable)
	}
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	cc, chans, reqs, err := ssh.NewClientConn(nc, hostPort(t), cfg)
	if err != nil {
		_ = nc.Close()
		return nil, classifyHandshake(t, known, err)
	}
	_ = nc.SetDeadline(time.Time{})
	c := &Conn{
		Target: t, client: ssh.NewClient(cc, chans, reqs), sem: make(chan struct{}, p.opts.MaxSessions),
		pool: p, key: k, closed: make(chan struct{}),
	}
	c.lastUsed.Store(time.Now().UnixNano())
	p.opts.Logger.Debug("ssh connected", "node", t.Name(), "address", hostPort(t), "user", user(t))
	return c, nil
}

func classifyHandshake(t target.SSH, known []ssh.PublicKey, err error) error {
	var hk *HostKeyError
	var uh *UnknownHostError
	var neg *ssh.AlgorithmNegotiationError
	switch {
	case errors.As(err, &hk):
		return hk
	case errors.As(err, &uh):
		return uh
	case errors.Is(err, ErrConfig):
		return err
	case errors.As(err, &neg) && neg.What == "host key" && len(known) > 0:
		return &HostKeyError{Node: t.Name(), Address: hostPort(t), File: t.KnownHostsFile,
			Offered: neg.RequestedAlgorithms, Expected: describeKeys(known)}
	}
	if loginRefused(err) {
		return fmt.Errorf("%s (%s) refused user %s: %v: %w", t.Name(), hostPort(t), user(t), err, ErrAuthFailed)
	}
	return fmt.Errorf("ssh handshake with %s (%s): %v: %w", t.Name(), hostPort(t), err, ErrUnreachable)
}

// loginRefused says whether a failed handshake is the host refusing the
// login: no method the client offered got through, or the server hung up
// after too many attempts.
func loginRefused(err error) bool {
	// third-party message: golang.org/x/crypto/ssh makes the first with
	// fmt.Errorf("ssh: unable to authenticate, attempted methods %v, no
	// supported methods remain") and gives the second (OpenSSH's
	// disconnect, "Too many authentication failures") as its unexported
	// *disconnectMsg: neither has an exported type or value to match.
	msg := err.Error()
	return strings.Contains(msg, "unable to authenticate") || strings.Contains(msg, "no supported methods remain") ||
		strings.Contains(msg, "Too many authentication failures")
}

func (p *Pool) auth(ctx context.Context, t target.SSH) ([]ssh.AuthMethod, func(), error) {
	none := func() {}
	if p.opts.Signers != nil {
		signers, err := p.opts.Signers(ctx, t)
		if err != nil {
			if !isClassified(err) {
				err = fmt.Errorf("%v: %w", err, ErrAuthFailed)
			}
			return nil, none, fmt.Errorf("%s: client credentials: %w", t.Name(), err)
		}
		if len(signers) > 0 {
			return []ssh.AuthMethod{ssh.PublicKeys(signers...)}, none, nil
		}
	}
	if t.IdentityFile != "" {
		signers, err := identitySigners(t)
		if err != nil {
			return nil, none, err
		}
		return []ssh.AuthMethod{ssh.PublicKeys(signers...)}, none, nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, none, fmt.Errorf("%s: no identity file and SSH_AUTH_SOCK is not set: %w", t.Name(), ErrConfig)
	}
	ac, err := net.Dial("unix", sock)
	if err != nil {
		return nil, none, fmt.Errorf("%s: ssh agent at $SSH_AUTH_SOCK: %v: %w", t.Name(), err, ErrConfig)
	}
	// The agent is only needed during the handshake.
	return []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(ac).Signers)}, func() { _ = ac.Close() }, nil
}

// identitySigners loads the identity file and, as OpenSSH does, the
// certificate next to it (IdentityFile-cert.pub) when there is one.
func identitySigners(t target.SSH) ([]ssh.Signer, error) {
	data, err := secretfile.Read(t.IdentityFile)
	if err != nil {
		return nil, fmt.Errorf("%s: read identity file: %v: %w", t.Name(), err, ErrConfig)
	}
	signer, err := ssh.ParsePrivateKey(data)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%s: identity file %s is passphrase-protected; Kedge cannot prompt: load it into ssh-agent and set ssh.agent: true: %w", t.Name(), t.IdentityFile, ErrConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: parse identity file %s: %v: %w", t.Name(), t.IdentityFile, err, ErrConfig)
	}
	signers := []ssh.Signer{signer}
	if certData, err := os.ReadFile(t.IdentityFile + "-cert.pub"); err == nil {
		pub, _, _, _, err := ssh.ParseAuthorizedKey(certData)
		if cert, ok := pub.(*ssh.Certificate); err == nil && ok {
			if cs, err := ssh.NewCertSigner(cert, signer); err == nil {
				signers = []ssh.Signer{cs, signer}
			}
		}
	}
	return signers, nil
}

func isClassified(err error) bool {
	for _, e := range []error{ErrHostKeyMismatch, ErrHostUnknown, ErrAuthFailed, ErrUnreachable, ErrConnectionLost, ErrConfig} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// watch evicts c when its transport ends, when a keepalive goes
// unanswered, or when it has been idle too long.
func (c *Conn) watch(opts Options) {
	go func() {
		err := c.client.Wait()
		reason := "closed by the peer"
		if err != nil {
			reason = err.Error()
		}
		c.pool.evict(c, reason)
	}()
	tick := time.NewTicker(opts.KeepAliveInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-tick.C:
		}
		if opts.IdleTimeout > 0 && c.inUse.Load() == 0 &&
			time.Since(time.Unix(0, c.lastUsed.Load())) > opts.IdleTimeout {
			c.pool.evict(c, "idle")
			return
		}
		if err := c.ping(opts.KeepAliveTimeout); err != nil {
			opts.Logger.Warn("ssh keepalive failed", "node", c.Target.Name(), "address", hostPort(c.Target), "error", err)
			c.pool.evict(c, "keepalive failed")
			return
		}
	}
}

// ping sends a keepalive and waits up to timeout for the answer (any
// answer, even a refusal, proves the peer alive).
func (c *Conn) ping(timeout time.Duration) error {
	res := make(chan error, 1)
	go func() {
		_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
		res <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-res:
		return err
	case <-t.C:
		return fmt.Errorf("no answer in %s", timeout)
	case <-c.closed:
		return errors.New("closed")
	}
}

func (c *Conn) close() {
	c.once.Do(func() {
		close(c.closed)
		_ = c.client.Close()
		c.mu.Lock()
		if c.sftp != nil {
			_ = c.sftp.Close()
			c.sftp = nil
		}
		c.mu.Unlock()
	})
}

// Client is the underlying SSH client. Sessions opened on it directly do
// not count against MaxSessions; prefer Session.
func (c *Conn) Client() *ssh.Client { return c.client }

// Session opens a session on this connection, waiting for a free slot
// (MaxSessions). Call release when done: it closes the session and frees
// the slot.
func (c *Conn) Session(ctx context.Context) (s *ssh.Session, release func(), err error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%s: waiting for a free session: %w", c.Target.Name(), ctx.Err())
	case <-c.closed:
		return nil, nil, fmt.Errorf("%s: connection closed: %w", c.Target.Name(), ErrConnectionLost)
	}
	c.inUse.Add(1)
	s, err = c.client.NewSession()
	if err != nil {
		c.inUse.Add(-1)
		<-c.sem
		return nil, nil, err
	}
	var once sync.Once
	return s, func() {
		once.Do(func() {
			_ = s.Close()
			c.lastUsed.Store(time.Now().UnixNano())
			c.inUse.Add(-1)
			<-c.sem
		})
	}, nil
}

// SFTP returns the connection's SFTP client, opening it on first use. It
// is shared: do not close it.
func (c *Conn) SFTP() (*sftp.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastUsed.Store(time.Now().UnixNano())
	if c.sftp != nil {
		return c.sftp, nil
	}
	select {
	case <-c.closed:
		return nil, fmt.Errorf("%s: connection closed: %w", c.Target.Name(), ErrConnectionLost)
	default:
	}
	cl, err := c.newSFTP()
	if err != nil {
		return nil, err
	}
	c.sftp = cl
	go func() {
		// An SFTP server that dies leaves the connection usable: forget
		// the client so the next call opens a new one.
		_ = cl.Wait()
		c.mu.Lock()
		if c.sftp == cl {
			c.sftp = nil
		}
		c.mu.Unlock()
	}()
	return cl, nil
}

// Session opens a session on the pooled connection to t, holding a slot
// until release is called. A connection found dead is evicted and
// redialled once, transparently.
func (p *Pool) Session(ctx context.Context, t target.SSH) (s *ssh.Session, release func(), err error) {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, t)
		if err != nil {
			return nil, nil, err
		}
		if err = c.checkBecome(ctx); err != nil && errors.Is(err, ErrPrivilege) {
			return nil, nil, err
		}
		var s *ssh.Session
		var release func()
		if err == nil {
			s, release, err = c.Session(ctx)
		}
		if err == nil {
			return s, release, nil
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%s: open session: %w", t.Name(), ctx.Err())
		}
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) {
			// The host is there but will not open another session
			// (sshd MaxSessions): the connection is fine, keep it.
			return nil, nil, fmt.Errorf("%s (%s) refused a session: %v: %w", t.Name(), hostPort(t), err, ErrConnectionLost)
		}
		p.evict(c, "session open failed: "+err.Error())
		if attempt > 0 {
			return nil, nil, fmt.Errorf("open session on %s (%s): %v: %w", t.Name(), hostPort(t), err, ErrConnectionLost)
		}
		p.opts.Logger.Debug("ssh connection found dead; redialling", "node", t.Name(), "error", err)
	}
}

// SFTP returns the SFTP client of the pooled connection to t. A dead
// connection is evicted and redialled once, transparently.
func (p *Pool) SFTP(ctx context.Context, t target.SSH) (*sftp.Client, error) {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, t)
		if err != nil {
			return nil, err
		}
		if err := c.checkBecome(ctx); errors.Is(err, ErrPrivilege) {
			return nil, err
		}
		cl, err := c.SFTP()
		if err == nil {
			return cl, nil
		}
		if errors.Is(err, ErrConfig) {
			return nil, fmt.Errorf("%s (%s): %w", t.Name(), hostPort(t), err)
		}
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) {
			return nil, fmt.Errorf("%s (%s) refused an sftp session: %v: %w", t.Name(), hostPort(t), err, ErrConnectionLost)
		}
		if c.ping(p.opts.KeepAliveTimeout) == nil {
			// The connection is alive: the host has no SFTP server.
			return nil, fmt.Errorf("%s (%s): sftp subsystem unavailable (is sftp-server installed and enabled in sshd?): %v: %w", t.Name(), hostPort(t), err, ErrConfig)
		}
		p.evict(c, "sftp open failed: "+err.Error())
		if attempt > 0 {
			return nil, fmt.Errorf("open sftp on %s (%s): %v: %w", t.Name(), hostPort(t), err, ErrConnectionLost)
		}
	}
}

// WithSFTP runs fn with the SFTP client of the pooled connection to t. When
// fn fails because the connection (or the SFTP server) went away, it is
// run once more on a fresh one, so fn must be safe to repeat; a second
// such failure is ErrConnectionLost. Other errors from fn come back as
// they are.
func (p *Pool) WithSFTP(ctx context.Context, t target.SSH, fn func(*sftp.Client) error) error {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, t)
		if err != nil {
			return err
		}
		cl, err := p.SFTP(ctx, t)
		if err != nil {
			return err
		}
		err = fn(cl)
		if err == nil || !IsTransportError(err) || ctx.Err() != nil {
			return err
		}
		if c.ping(p.opts.KeepAliveTimeout) != nil {
			p.evict(c, "transport error: "+err.Error())
		} else {
			c.dropSFTP(cl)
		}
		if attempt > 0 {
			return fmt.Errorf("%s (%s): %v: %w", t.Name(), hostPort(t), err, ErrConnectionLost)
		}
		p.opts.Logger.Debug("sftp failed on a dead connection; retrying on a fresh one", "node", t.Name(), "error", err)
	}
}

func (c *Conn) dropSFTP(cl *sftp.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sftp == cl {
		c.sftp = nil
		_ = cl.Close()
	}
}

// Lost classifies an error from an open session or SFTP call: when it
// says the transport under it died, it is wrapped as ErrConnectionLost
// (and the connection evicted if it no longer answers); other errors come
// back as they are.
func (p *Pool) Lost(t target.SSH, err error) error {
	if err == nil || !IsTransportError(err) {
		return err
	}
	p.mu.Lock()
	e, ok := p.conns[key(t)]
	p.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
			if c := e.conn; c != nil && c.ping(p.opts.KeepAliveTimeout) != nil {
				p.evict(c, "transport error: "+err.Error())
			}
		default:
		}
	}
	return fmt.Errorf("%s (%s): %v: %w", t.Name(), hostPort(t), err, ErrConnectionLost)
}

// IsTransportError reports whether err says the connection (or the SFTP
// channel) under a call went away.
func IsTransportError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) || errors.Is(err, sftp.ErrSSHFxConnectionLost) ||
		errors.Is(err, sftp.ErrSSHFxNoConnection)
}
