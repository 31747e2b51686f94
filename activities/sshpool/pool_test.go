package sshpool

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"kedge.dev/kedge/integration/sshtest"

	"kedge.dev/kedge/actions/target"
)

func sshTarget(s *sshtest.Server) target.SSH {
	return target.SSH{Node: "worker-1", Address: s.Host, Port: s.Port, IdentityFile: s.IdentityFile, KnownHostsFile: s.KnownHostsFile}
}

// run runs cmd over a pooled session and returns its stdout.
func run(ctx context.Context, p *Pool, t target.SSH, cmd string) (string, error) {
	s, release, err := p.Session(ctx, t)
	if err != nil {
		return "", err
	}
	defer release()
	out, err := s.Output(cmd)
	return string(out), err
}

func TestConcurrentSessionsShareOneConnection(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{MaxSessions: 4})
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := run(t.Context(), p, sshTarget(srv), fmt.Sprintf("echo %d", i))
			if err == nil && out != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("session %d got %q", i, out)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("%d connections for 40 concurrent sessions, want 1", n)
	}
	if n := srv.Execs(); n != 40 {
		t.Errorf("%d commands ran, want 40", n)
	}
}

func TestConcurrentGetsDialOnce(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{})
	defer p.Close()
	conns := make([]*Conn, 20)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.Get(t.Context(), sshTarget(srv))
			if err != nil {
				t.Error(err)
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	for _, c := range conns {
		if c != conns[0] {
			t.Fatal("callers got different connections")
		}
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
	// A different user is a different connection.
	t2 := sshTarget(srv)
	t2.User = "other"
	c, err := p.Get(t.Context(), t2)
	if err != nil || c == conns[0] {
		t.Errorf("another user shared the connection (%v)", err)
	}
}

func TestMaxSessionsBoundsConcurrentSessions(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{MaxSessions: 2})
	defer p.Close()
	var releases []func()
	for range 2 {
		_, release, err := p.Session(t.Context(), sshTarget(srv))
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := p.Session(ctx, sshTarget(srv)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third session did not wait for a slot: %v", err)
	}
	releases[0]()
	releases[0]() // release is idempotent
	_, release, err := p.Session(t.Context(), sshTarget(srv))
	if err != nil {
		t.Fatalf("a freed slot was not reused: %v", err)
	}
	release()
	releases[1]()
}

func TestHostKeyMismatchNamesBothFingerprints(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	other := sshtest.NewSigner(t)
	srv.WriteKnownHosts(t, srv.KnownHostsFile, other.PublicKey())
	p := New(Options{})
	defer p.Close()
	_, err := run(t.Context(), p, sshTarget(srv), "true")
	var hk *HostKeyError
	if !errors.Is(err, ErrHostKeyMismatch) || !errors.As(err, &hk) || Retryable(err) {
		t.Fatalf("got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"worker-1", srv.Addr(), ssh.FingerprintSHA256(srv.HostKey.PublicKey()), ssh.FingerprintSHA256(other.PublicKey()), "out of band"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if srv.Execs() != 0 {
		t.Error("a command ran on a host with the wrong key")
	}
}

func TestHostKeyOfAnotherTypeIsAMismatch(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaSigner, _ := ssh.NewSignerFromKey(rsaKey)
	srv := sshtest.Start(t, sshtest.Config{HostKey: rsaSigner})
	other := sshtest.NewSigner(t) // ed25519: a type the host does not have
	srv.WriteKnownHosts(t, srv.KnownHostsFile, other.PublicKey())
	p := New(Options{})
	defer p.Close()
	_, err = run(t.Context(), p, sshTarget(srv), "true")
	var hk *HostKeyError
	if !errors.As(err, &hk) || len(hk.Offered) == 0 || Retryable(err) {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), ssh.FingerprintSHA256(other.PublicKey())) || !strings.Contains(err.Error(), "rsa") {
		t.Errorf("message %q", err)
	}
}

func TestHostKeyAlgorithmsFollowKnownHosts(t *testing.T) {
	// The host has ed25519 and RSA keys; known_hosts holds only the RSA
	// one. Without HostKeyAlgorithms the host would present ed25519 and
	// the connection would fail as a mismatch.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaSigner, _ := ssh.NewSignerFromKey(rsaKey)
	srv := sshtest.Start(t, sshtest.Config{HostKey: rsaSigner, ExtraHostKeys: []ssh.Signer{sshtest.NewSigner(t)}})
	p := New(Options{})
	defer p.Close()
	if out, err := run(t.Context(), p, sshTarget(srv), "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestUnknownHostIsRefusedWithAdvice(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	if err := os.WriteFile(srv.KnownHostsFile, []byte("# no hosts\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := New(Options{})
	defer p.Close()
	_, err := run(t.Context(), p, sshTarget(srv), "true")
	var uh *UnknownHostError
	if !errors.Is(err, ErrHostUnknown) || errors.Is(err, ErrHostKeyMismatch) || !errors.As(err, &uh) || Retryable(err) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"worker-1", fmt.Sprintf("ssh-keyscan -p %d %s", srv.Port, srv.Host), ssh.FingerprintSHA256(srv.HostKey.PublicKey())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// Never trust on first use: the file is left alone and the next try
	// fails the same way.
	if data, _ := os.ReadFile(srv.KnownHostsFile); string(data) != "# no hosts\n" {
		t.Errorf("known_hosts changed: %q", data)
	}
	if _, err := run(t.Context(), p, sshTarget(srv), "true"); !errors.Is(err, ErrHostUnknown) {
		t.Errorf("second try: %v", err)
	}
}

func TestKnownHostsIsRequired(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	tg := sshTarget(srv)
	tg.KnownHostsFile = ""
	p := New(Options{})
	defer p.Close()
	if _, err := run(t.Context(), p, tg, "true"); !errors.Is(err, ErrConfig) || Retryable(err) || !strings.Contains(err.Error(), "worker-1") {
		t.Fatalf("got %v", err)
	}
	tg.KnownHostsFile = filepath.Join(t.TempDir(), "missing")
	if _, err := run(t.Context(), p, tg, "true"); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing known_hosts: %v", err)
	}
	if srv.Accepted() != 0 {
		t.Error("dialled without a known_hosts file")
	}
}

func writeKey(t *testing.T, passphrase string) string {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(f, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAuthFailureIsNotRetryable(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	tg := sshTarget(srv)
	tg.IdentityFile = writeKey(t, "")
	p := New(Options{})
	defer p.Close()
	_, err := run(t.Context(), p, tg, "true")
	if !errors.Is(err, ErrAuthFailed) || Retryable(err) || !strings.Contains(err.Error(), "refused user root") {
		t.Fatalf("got %v", err)
	}
}

func TestPassphraseProtectedKeyIsAClearError(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	tg := sshTarget(srv)
	tg.IdentityFile = writeKey(t, "secret")
	p := New(Options{})
	defer p.Close()
	_, err := run(t.Context(), p, tg, "true")
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "passphrase-protected") || !strings.Contains(err.Error(), "ssh-agent") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Error("the passphrase leaked into the error")
	}
}

func TestAgentAuth(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	data, err := os.ReadFile(srv.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	tg := sshTarget(srv)
	tg.IdentityFile = ""
	p := New(Options{})
	defer p.Close()
	if out, err := run(t.Context(), p, tg, "echo via-agent"); err != nil || out != "via-agent\n" {
		t.Fatalf("%q %v", out, err)
	}

	t.Setenv("SSH_AUTH_SOCK", "")
	p2 := New(Options{})
	defer p2.Close()
	if _, err := run(t.Context(), p2, tg, "true"); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "SSH_AUTH_SOCK") {
		t.Fatalf("no agent: %v", err)
	}
}

func TestSignersHook(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	tg := sshTarget(srv)
	tg.IdentityFile = ""
	t.Setenv("SSH_AUTH_SOCK", "")
	var calls int
	p := New(Options{Signers: func(ctx context.Context, got target.SSH) ([]ssh.Signer, error) {
		calls++
		if got.Node != "worker-1" {
			t.Errorf("hook got %+v", got)
		}
		return []ssh.Signer{srv.ClientKey}, nil
	}})
	defer p.Close()
	if out, err := run(t.Context(), p, tg, "echo signed"); err != nil || out != "signed\n" || calls != 1 {
		t.Fatalf("%q %v calls=%d", out, err, calls)
	}

	down := New(Options{Signers: func(context.Context, target.SSH) ([]ssh.Signer, error) {
		return nil, fmt.Errorf("vault sealed: %w", ErrUnreachable)
	}})
	defer down.Close()
	if _, err := run(t.Context(), down, tg, "true"); !errors.Is(err, ErrUnreachable) || !Retryable(err) {
		t.Errorf("a classified hook error lost its class: %v", err)
	}
	denied := New(Options{Signers: func(context.Context, target.SSH) ([]ssh.Signer, error) {
		return nil, errors.New("permission denied by policy")
	}})
	defer denied.Close()
	if _, err := run(t.Context(), denied, tg, "true"); !errors.Is(err, ErrAuthFailed) || Retryable(err) {
		t.Errorf("hook error: %v", err)
	}
}

func TestClosedPortIsUnreachableAndRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := sshtest.Start(t, sshtest.Config{})
	tg := sshTarget(srv)
	tg.Port = port
	p := New(Options{DialTimeout: 2 * time.Second})
	defer p.Close()
	start := time.Now()
	_, err = run(t.Context(), p, tg, "true")
	if !errors.Is(err, ErrUnreachable) || !Retryable(err) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "worker-1") {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("a refused connection took %s", time.Since(start))
	}
}

func TestHandshakeTimeoutIsUnreachable(t *testing.T) {
	// A port that accepts but never speaks SSH.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	srv := sshtest.Start(t, sshtest.Config{})
	tg := sshTarget(srv)
	tg.Port = ln.Addr().(*net.TCPAddr).Port
	p := New(Options{DialTimeout: 200 * time.Millisecond})
	defer p.Close()
	if _, err := run(t.Context(), p, tg, "true"); !errors.Is(err, ErrUnreachable) || !Retryable(err) {
		t.Fatalf("got %v", err)
	}
}

func TestDroppedConnectionIsRedialledTransparently(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{})
	defer p.Close()
	tg := sshTarget(srv)
	if _, err := run(t.Context(), p, tg, "true"); err != nil {
		t.Fatal(err)
	}
	c1, _ := p.Get(t.Context(), tg)

	// Right after the drop, before the pool has noticed.
	srv.DropAll()
	if out, err := run(t.Context(), p, tg, "echo again"); err != nil || out != "again\n" {
		t.Fatalf("first session after a drop: %q %v", out, err)
	}
	c2, _ := p.Get(t.Context(), tg)
	if c1 == c2 {
		t.Fatal("the dead connection is still pooled")
	}

	// After the pool has noticed (the transport watcher evicts it).
	srv.DropAll()
	waitFor(t, func() bool { return !p.pooled(tg) })
	if out, err := run(t.Context(), p, tg, "echo third"); err != nil || out != "third\n" {
		t.Fatalf("after eviction: %q %v", out, err)
	}
	if n := srv.Accepted(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
	if cl, err := p.SFTP(t.Context(), tg); err != nil {
		t.Fatal(err)
	} else if _, err := cl.Getwd(); err != nil {
		t.Fatal(err)
	}
	srv.DropAll()
	calls := 0
	err := p.WithSFTP(t.Context(), tg, func(cl *sftp.Client) error {
		calls++
		_, err := cl.Getwd()
		return err
	})
	if err != nil || calls > 2 {
		t.Fatalf("sftp after a drop: %v (%d calls)", err, calls)
	}
	if n := srv.Accepted(); n != 4 {
		t.Errorf("%d connections, want 4", n)
	}
}

func TestStalledConnectionIsEvictedByKeepalive(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	var logs strings.Builder
	var mu sync.Mutex
	p := New(Options{KeepAliveInterval: 30 * time.Millisecond, KeepAliveTimeout: 50 * time.Millisecond, Logger: testLogger(&mu, &logs)})
	defer p.Close()
	tg := sshTarget(srv)
	if _, err := run(t.Context(), p, tg, "true"); err != nil {
		t.Fatal(err)
	}
	// Answered keepalives keep it.
	time.Sleep(150 * time.Millisecond)
	if !p.pooled(tg) {
		t.Fatal("a healthy connection was evicted")
	}
	srv.StallKeepalives(true)
	waitFor(t, func() bool { return !p.pooled(tg) })
	srv.StallKeepalives(false)
	if _, err := run(t.Context(), p, tg, "true"); err != nil {
		t.Fatal(err)
	}
	if n := srv.Accepted(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "keepalive failed") {
		t.Errorf("logs: %s", logs.String())
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{KeepAliveInterval: 20 * time.Millisecond, IdleTimeout: 60 * time.Millisecond})
	defer p.Close()
	tg := sshTarget(srv)
	s, release, err := p.Session(t.Context(), tg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if !p.pooled(tg) {
		t.Fatal("a connection with an open session was closed as idle")
	}
	if err := s.Run("true"); err != nil {
		t.Fatal(err)
	}
	release()
	waitFor(t, func() bool { return !p.pooled(tg) && srv.Live() == 0 })
}

func TestSFTPClientIsCachedAndMissingSubsystemIsConfig(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{})
	defer p.Close()
	a, err := p.SFTP(t.Context(), sshTarget(srv))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.SFTP(t.Context(), sshTarget(srv))
	if err != nil || a != b {
		t.Fatalf("sftp client not cached (%v)", err)
	}

	bare := sshtest.Start(t, sshtest.Config{NoSFTP: true})
	_, err = p.SFTP(t.Context(), sshTarget(bare))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "sftp") {
		t.Fatalf("got %v", err)
	}
	if n := bare.Accepted(); n != 1 {
		t.Errorf("a host without sftp was redialled: %d connections", n)
	}
}

func TestClosedPoolRefuses(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{})
	if _, err := run(t.Context(), p, sshTarget(srv), "true"); err != nil {
		t.Fatal(err)
	}
	p.Close()
	waitFor(t, func() bool { return srv.Live() == 0 })
	if _, err := p.Get(t.Context(), sshTarget(srv)); err == nil {
		t.Fatal("a closed pool handed out a connection")
	}
}

func TestCancelledWaiterDoesNotFailTheDial(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	p := New(Options{})
	defer p.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Get(ctx, sshTarget(srv)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if _, err := p.Get(t.Context(), sshTarget(srv)); err != nil {
		t.Fatalf("the dial started by a cancelled caller failed for the next: %v", err)
	}
}

func (p *Pool) pooled(t target.SSH) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.conns[key(t)]
	return ok
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func testLogger(mu *sync.Mutex, b *strings.Builder) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu, b}, nil))
}
