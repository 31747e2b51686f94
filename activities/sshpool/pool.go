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
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Options tune a Pool. Zero values take the defaults.
type Options struct {
	DialTimeout       time.Duration // default 10s
	KeepAliveInterval time.Duration // default 15s
	// MaxSessions bounds concurrent sessions on one connection (sshd's
	// MaxSessions defaults to 10). Default 8.
	MaxSessions int
	Logger      *slog.Logger
	// Signers, when set, supplies the client keys for a target (e.g.
	// short-lived certificates); it replaces IdentityFile and the agent.
	Signers func(ctx context.Context, t Target) ([]ssh.Signer, error)
}

// Pool hands out shared connections.
type Pool struct {
	opts  Options
	mu    sync.Mutex
	conns map[string]*entry
}

type entry struct {
	ready chan struct{} // closed when dialling ends
	conn  *Conn
	err   error
}

// Conn is one live connection to a host.
type Conn struct {
	Target Target
	client *ssh.Client
	sem    chan struct{}
	pool   *Pool
	key    string

	sftpOnce sync.Mutex
	sftp     *sftp.Client
	closed   chan struct{}
	once     sync.Once
}

// New makes a pool.
func New(opts Options) *Pool {
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.KeepAliveInterval == 0 {
		opts.KeepAliveInterval = 15 * time.Second
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Pool{opts: opts, conns: map[string]*entry{}}
}

func (t Target) key() string {
	return strings.Join([]string{t.User, t.Address, strconv.Itoa(t.port()), t.IdentityFile, t.KnownHostsFile}, "|")
}

func (t Target) port() int {
	if t.Port == 0 {
		return 22
	}
	return t.Port
}

func (t Target) user() string {
	if t.User == "" {
		return "root"
	}
	return t.User
}

func (t Target) hostPort() string { return net.JoinHostPort(t.Address, strconv.Itoa(t.port())) }

func (t Target) name() string {
	if t.Node != "" {
		return t.Node
	}
	return t.Address
}

// Get returns the pooled connection to t, dialling it when needed. Many
// callers asking at once share one dial.
func (p *Pool) Get(ctx context.Context, t Target) (*Conn, error) {
	k := t.key()
	p.mu.Lock()
	e, ok := p.conns[k]
	if !ok {
		e = &entry{ready: make(chan struct{})}
		p.conns[k] = e
		p.mu.Unlock()
		e.conn, e.err = p.dial(ctx, t, k)
		if e.err != nil {
			p.mu.Lock()
			delete(p.conns, k)
			p.mu.Unlock()
		}
		close(e.ready)
		return e.conn, e.err
	}
	p.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.conn, nil
}

// evict drops c from the pool (if it is still the pooled one) and closes it.
func (p *Pool) evict(c *Conn) {
	p.mu.Lock()
	if e, ok := p.conns[c.key]; ok && e.conn == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
	c.close()
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*entry{}
	p.mu.Unlock()
	for _, e := range conns {
		<-e.ready
		if e.conn != nil {
			e.conn.close()
		}
	}
	return nil
}

func (p *Pool) dial(ctx context.Context, t Target, k string) (*Conn, error) {
	if t.Address == "" {
		return nil, fmt.Errorf("%s: no address: %w", t.name(), ErrConfig)
	}
	if t.KnownHostsFile == "" {
		return nil, fmt.Errorf("%s: no known_hosts file (host keys are always verified): %w", t.name(), ErrConfig)
	}
	hostKeys, algos, err := hostKeyCallback(t)
	if err != nil {
		return nil, err
	}
	auth, err := p.auth(ctx, t)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ClientConfig{
		User:              t.user(),
		Auth:              auth,
		HostKeyCallback:   hostKeys,
		HostKeyAlgorithms: algos,
		Timeout:           p.opts.DialTimeout,
	}
	dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", t.hostPort())
	if err != nil {
		return nil, fmt.Errorf("dial %s (%s): %v: %w", t.name(), t.hostPort(), err, ErrUnreachable)
	}
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	cc, chans, reqs, err := ssh.NewClientConn(nc, t.hostPort(), cfg)
	if err != nil {
		nc.Close()
		return nil, classifyHandshake(t, err)
	}
	_ = nc.SetDeadline(time.Time{})
	c := &Conn{
		Target: t, client: ssh.NewClient(cc, chans, reqs), sem: make(chan struct{}, p.opts.MaxSessions),
		pool: p, key: k, closed: make(chan struct{}),
	}
	go c.keepAlive(p.opts.KeepAliveInterval, p.opts.Logger)
	p.opts.Logger.Debug("ssh connected", "node", t.name(), "address", t.hostPort())
	return c, nil
}

func classifyHandshake(t Target, err error) error {
	var hk *HostKeyError
	switch {
	case errors.As(err, &hk):
		return err
	case errors.Is(err, ErrHostUnknown):
		return err
	case strings.Contains(err.Error(), "unable to authenticate"), strings.Contains(err.Error(), "no supported methods remain"):
		return fmt.Errorf("%s (%s) refused user %s: %v: %w", t.name(), t.hostPort(), t.user(), err, ErrAuthFailed)
	}
	return fmt.Errorf("ssh handshake with %s (%s): %v: %w", t.name(), t.hostPort(), err, ErrUnreachable)
}

// hostKeyCallback verifies against known_hosts and wraps a mismatch into a
// HostKeyError with both fingerprints.
func hostKeyCallback(t Target) (ssh.HostKeyCallback, []string, error) {
	cb, err := knownhosts.New(t.KnownHostsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: read known_hosts %s: %v: %w", t.name(), t.KnownHostsFile, err, ErrConfig)
	}
	algos := knownAlgorithms(cb, t)
	verify := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				return fmt.Errorf("%s (%s) is not in %s; verify its key and add it (e.g. ssh-keyscan -p %d %s >> %s): %w",
					t.name(), t.hostPort(), t.KnownHostsFile, t.port(), t.Address, t.KnownHostsFile, ErrHostUnknown)
			}
			hk := &HostKeyError{Node: t.name(), Address: t.hostPort(), Presented: ssh.FingerprintSHA256(key), File: t.KnownHostsFile}
			for _, w := range ke.Want {
				hk.Expected = append(hk.Expected, ssh.FingerprintSHA256(w.Key))
			}
			return hk
		}
		var re *knownhosts.RevokedError
		if errors.As(err, &re) {
			return &HostKeyError{Node: t.name(), Address: t.hostPort(), Presented: ssh.FingerprintSHA256(key) + " (revoked)", File: t.KnownHostsFile}
		}
		return err
	}
	return verify, algos, nil
}

// knownAlgorithms asks the callback which key types known_hosts holds for
// the host, so the server presents one of those.
func knownAlgorithms(cb ssh.HostKeyCallback, t Target) []string {
	addr := &net.TCPAddr{IP: net.ParseIP(t.Address), Port: t.port()}
	err := cb(t.hostPort(), addr, probeKey{})
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var algos []string
	for _, w := range ke.Want {
		switch typ := w.Key.Type(); typ {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algos = append(algos, typ)
		}
	}
	return algos
}

// probeKey matches nothing, so the callback reports the keys it wants.
type probeKey struct{}

func (probeKey) Type() string                        { return "kedge-probe" }
func (probeKey) Marshal() []byte                     { return []byte("kedge-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe") }

func (p *Pool) auth(ctx context.Context, t Target) ([]ssh.AuthMethod, error) {
	if p.opts.Signers != nil {
		signers, err := p.opts.Signers(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("%s: client credentials: %v: %w", t.name(), err, ErrAuthFailed)
		}
		return []ssh.AuthMethod{ssh.PublicKeys(signers...)}, nil
	}
	if t.IdentityFile != "" {
		data, err := os.ReadFile(t.IdentityFile)
		if err != nil {
			return nil, fmt.Errorf("%s: read identity file: %v: %w", t.name(), err, ErrConfig)
		}
		signer, err := ssh.ParsePrivateKey(data)
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("%s: identity file %s is passphrase-protected: load it into ssh-agent and set ssh.agent: true: %w", t.name(), t.IdentityFile, ErrConfig)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: parse identity file %s: %v: %w", t.name(), t.IdentityFile, err, ErrConfig)
		}
		return []ssh.AuthMethod{ssh.PublicKeys(signer)}, nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, fmt.Errorf("%s: no identity file and SSH_AUTH_SOCK is not set: %w", t.name(), ErrConfig)
	}
	ac, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("%s: ssh agent: %v: %w", t.name(), err, ErrConfig)
	}
	return []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(ac).Signers)}, nil
}

func (c *Conn) keepAlive(every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-tick.C:
		}
		res := make(chan error, 1)
		go func() {
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			res <- err
		}()
		var err error
		select {
		case err = <-res:
		case <-time.After(every):
			err = errors.New("no answer")
		case <-c.closed:
			return
		}
		if err != nil {
			log.Warn("ssh keepalive failed; dropping connection", "node", c.Target.name(), "error", err)
			c.pool.evict(c)
			return
		}
	}
}

func (c *Conn) close() {
	c.once.Do(func() {
		close(c.closed)
		if c.sftp != nil {
			_ = c.sftp.Close()
		}
		_ = c.client.Close()
	})
}

// Session opens a session, holding a slot until release is called. A
// connection found dead is evicted and redialled once.
func (p *Pool) Session(ctx context.Context, t Target) (s *ssh.Session, release func(), err error) {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, t)
		if err != nil {
			return nil, nil, err
		}
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		s, err := c.client.NewSession()
		if err == nil {
			return s, func() { s.Close(); <-c.sem }, nil
		}
		<-c.sem
		p.evict(c)
		if attempt > 0 {
			return nil, nil, fmt.Errorf("open session on %s: %v: %w", t.name(), err, ErrConnectionLost)
		}
	}
}

// SFTP returns the connection's SFTP client, opening it once. A dead
// connection is evicted and redialled once.
func (p *Pool) SFTP(ctx context.Context, t Target) (*sftp.Client, error) {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, t)
		if err != nil {
			return nil, err
		}
		c.sftpOnce.Lock()
		if c.sftp == nil {
			c.sftp, err = sftp.NewClient(c.client, sftp.UseConcurrentWrites(true))
		}
		cl := c.sftp
		c.sftpOnce.Unlock()
		if err == nil {
			return cl, nil
		}
		p.evict(c)
		if attempt > 0 {
			return nil, fmt.Errorf("open sftp on %s: %v: %w", t.name(), err, ErrConnectionLost)
		}
	}
}

// Lost wraps an error from an open session or SFTP call: when the
// connection under it died, the error is classified ErrConnectionLost and
// the connection evicted.
func (p *Pool) Lost(t Target, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) || errors.Is(err, sftp.ErrSSHFxConnectionLost) {
		p.mu.Lock()
		e, ok := p.conns[t.key()]
		p.mu.Unlock()
		if ok {
			select {
			case <-e.ready:
				if e.conn != nil {
					p.evict(e.conn)
				}
			default:
			}
		}
		return fmt.Errorf("%s: %v: %w", t.name(), err, ErrConnectionLost)
	}
	return err
}
