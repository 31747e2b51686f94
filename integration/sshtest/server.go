// Package sshtest runs an in-process SSH server for tests of the host
// actions: it executes commands with the local sh (in a new session, like
// sshd), honours the "signal" request, answers keepalives, and serves the
// sftp subsystem from the local file system. It needs neither root nor
// sshd. It is for tests only: it accepts exactly one client key and does
// no privilege separation.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Config tunes a Server. Zero values take the defaults.
type Config struct {
	// HostKey is the server's host key (default: a fresh ed25519 key).
	HostKey ssh.Signer
	// ExtraHostKeys are more host keys (of other types) the server offers;
	// KnownHostsFile lists only HostKey.
	ExtraHostKeys []ssh.Signer
	// NoSFTP refuses the sftp subsystem.
	NoSFTP bool
	// HostCA, when set, signs a host certificate for HostKey that the
	// server presents besides the plain key, as sshd's HostCertificate
	// does. KnownHostsFile still lists only the plain key.
	HostCA ssh.Signer
	// HostCertPrincipals are the certificate's principals (default
	// 127.0.0.1, the address the server listens on).
	HostCertPrincipals []string
	// HostCertExpired makes the certificate one that expired an hour ago.
	HostCertExpired bool
}

// Server is a running test SSH server.
type Server struct {
	// Host and Port are where it listens (127.0.0.1 and a free port).
	Host string
	Port int
	// HostKey is the server's host key.
	HostKey ssh.Signer
	// HostCert is the host certificate the server presents (Config.HostCA).
	HostCert *ssh.Certificate
	// ClientKey is the one key the server lets in; IdentityFile holds it
	// (unencrypted) and KnownHostsFile the server's host key, both in a
	// temporary directory.
	ClientKey      ssh.Signer
	IdentityFile   string
	KnownHostsFile string
	// Dir is a temporary directory, the working directory of commands.
	Dir string

	ln       net.Listener
	cfg      *ssh.ServerConfig
	accepted atomic.Int64
	execs    atomic.Int64
	stall    atomic.Bool
	noSFTP   bool

	mu    sync.Mutex
	conns map[*ssh.ServerConn]struct{}
	procs map[*os.Process]struct{}
	wg    sync.WaitGroup
}

// Start starts a server; it stops when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	dir := t.TempDir()
	hostKey := cfg.HostKey
	if hostKey == nil {
		hostKey = NewSigner(t)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		HostKey:      hostKey,
		ClientKey:    clientKey,
		IdentityFile: filepath.Join(dir, "id_ed25519"),
		Dir:          filepath.Join(dir, "root"),
		noSFTP:       cfg.NoSFTP,
		conns:        map[*ssh.ServerConn]struct{}{},
		procs:        map[*os.Process]struct{}{},
	}
	if err := os.WriteFile(s.IdentityFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := clientKey.PublicKey().Marshal()
	s.cfg = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) == string(want) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	s.cfg.AddHostKey(hostKey)
	if cfg.HostCA != nil {
		s.HostCert = SignHostCert(t, cfg.HostCA, hostKey.PublicKey(), cfg.HostCertPrincipals, cfg.HostCertExpired)
		certSigner, err := ssh.NewCertSigner(s.HostCert, hostKey)
		if err != nil {
			t.Fatal(err)
		}
		s.cfg.AddHostKey(certSigner)
	}
	for _, k := range cfg.ExtraHostKeys {
		s.cfg.AddHostKey(k)
	}
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := s.ln.Addr().(*net.TCPAddr)
	s.Host, s.Port = addr.IP.String(), addr.Port
	s.KnownHostsFile = filepath.Join(dir, "known_hosts")
	s.WriteKnownHosts(t, s.KnownHostsFile, hostKey.PublicKey())
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.Close)
	return s
}

// NewSigner makes a fresh ed25519 key.
func NewSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SignHostCert signs a host certificate for key with ca, valid for
// principals (default 127.0.0.1) from a minute ago for an hour, or, when
// expired, for an hour that ended an hour ago.
func SignHostCert(t testing.TB, ca ssh.Signer, key ssh.PublicKey, principals []string, expired bool) *ssh.Certificate {
	t.Helper()
	if len(principals) == 0 {
		principals = []string{"127.0.0.1"}
	}
	from := time.Now().Add(-time.Minute)
	if expired {
		from = time.Now().Add(-2 * time.Hour)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	cert := &ssh.Certificate{
		Key: key, Serial: serial.Uint64(), CertType: ssh.HostCert, KeyId: "sshtest host",
		ValidPrincipals: principals,
		ValidAfter:      uint64(from.Unix()), ValidBefore: uint64(from.Add(time.Hour).Unix()),
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return cert
}

// CertAuthorityLine is a known_hosts line trusting ca for host
// certificates of the hosts matching pattern (e.g. "[127.0.0.1]:2222";
// a pattern without a port matches port 22 only).
func CertAuthorityLine(pattern string, ca ssh.PublicKey) string {
	return "@cert-authority " + pattern + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca)))
}

// RevokedLine is a known_hosts line marking key @revoked.
func RevokedLine(key ssh.PublicKey) string {
	return "@revoked * " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

// WriteKnownHosts writes a known_hosts file naming this server with keys.
func (s *Server) WriteKnownHosts(t testing.TB, file string, keys ...ssh.PublicKey) {
	t.Helper()
	var data []byte
	for _, k := range keys {
		data = append(data, knownhosts.Line([]string{knownhosts.Normalize(s.Addr())}, k)+"\n"...)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Accepted is how many connections the server has accepted.
func (s *Server) Accepted() int { return int(s.accepted.Load()) }

// Execs is how many commands the server has started.
func (s *Server) Execs() int { return int(s.execs.Load()) }

// Live is how many connections are open now.
func (s *Server) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// DropAll closes the server side of every open connection, as if the
// host rebooted or a firewall cut them.
func (s *Server) DropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
}

// StallKeepalives makes the server stop answering global requests (the
// connection looks alive at the TCP level but is not).
func (s *Server) StallKeepalives(on bool) { s.stall.Store(on) }

// Close stops the server, closes every connection and kills the commands
// still running.
func (s *Server) Close() {
	_ = s.ln.Close()
	s.DropAll()
	s.mu.Lock()
	for p := range s.procs {
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) track(p *os.Process, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if running {
		s.procs[p] = struct{}{}
	} else {
		delete(s.procs, p)
	}
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(nc)
		}()
	}
}

func (s *Server) handle(nc net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.cfg)
	if err != nil {
		_ = nc.Close()
		return
	}
	s.mu.Lock()
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
	}()
	go func() {
		for r := range reqs {
			if s.stall.Load() {
				continue
			}
			if r.WantReply {
				// OpenSSH answers keepalive@openssh.com with a failure.
				_ = r.Reply(false, nil)
			}
		}
	}()
	var wg sync.WaitGroup
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(ch, creqs)
		}()
	}
	_ = sc.Close()
	wg.Wait()
}

// session runs one session channel: exec or the sftp subsystem.
func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var (
		mu   sync.Mutex
		proc *os.Process
		done = make(chan struct{})
	)
	started := false
	for {
		var r *ssh.Request
		var ok bool
		select {
		case r, ok = <-reqs:
		case <-done:
			go ssh.DiscardRequests(reqs)
			return
		}
		if !ok {
			// The client closed the channel. Like sshd without a tty,
			// leave a running command alone; it ends on its own (or
			// when the server is closed).
			if started {
				<-done
			}
			return
		}
		switch r.Type {
		case "exec":
			var p struct{ Command string }
			if started || ssh.Unmarshal(r.Payload, &p) != nil {
				_ = r.Reply(false, nil)
				continue
			}
			cmd := exec.Command("sh", "-c", p.Command)
			cmd.Dir = s.Dir
			// Its own $TMPDIR: what a command killed there leaves (a
			// wrapper's output files) goes with the server.
			cmd.Env = append(os.Environ(), "HOME="+s.Dir, "TMPDIR="+s.Dir)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				_ = r.Reply(false, nil)
				continue
			}
			cmd.Stdout = ch
			cmd.Stderr = ch.Stderr()
			if err := cmd.Start(); err != nil {
				_ = r.Reply(false, nil)
				continue
			}
			s.execs.Add(1)
			started = true
			mu.Lock()
			proc = cmd.Process
			mu.Unlock()
			s.track(cmd.Process, true)
			_ = r.Reply(true, nil)
			go func() {
				_, _ = io.Copy(stdin, ch)
				_ = stdin.Close()
			}()
			go func() {
				err := cmd.Wait()
				s.track(cmd.Process, false)
				var exit *exec.ExitError
				switch {
				case err == nil:
					sendExitStatus(ch, 0)
				case errors.As(err, &exit):
					if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
						sendExitSignal(ch, ws.Signal())
					} else {
						sendExitStatus(ch, exit.ExitCode())
					}
				default:
					sendExitStatus(ch, 255)
				}
				_ = ch.CloseWrite()
				_ = ch.Close()
				close(done)
			}()
		case "subsystem":
			var p struct{ Name string }
			if started || s.noSFTP || ssh.Unmarshal(r.Payload, &p) != nil || p.Name != "sftp" {
				_ = r.Reply(false, nil)
				continue
			}
			started = true
			_ = r.Reply(true, nil)
			go func() {
				srv, err := sftp.NewServer(ch)
				if err == nil {
					_ = srv.Serve()
					_ = srv.Close()
				}
				sendExitStatus(ch, 0)
				_ = ch.Close()
				close(done)
			}()
		case "signal":
			var p struct{ Signal string }
			if ssh.Unmarshal(r.Payload, &p) == nil {
				mu.Lock()
				if proc != nil {
					if sig, ok := signals[p.Signal]; ok {
						_ = proc.Signal(sig)
					}
				}
				mu.Unlock()
			}
			if r.WantReply {
				_ = r.Reply(true, nil)
			}
		default:
			// env, pty-req, shell...: refused, as a locked-down sshd would.
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}
}

var signals = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT,
	"HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

func sendExitStatus(ch ssh.Channel, code int) {
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
}

func sendExitSignal(ch ssh.Channel, sig syscall.Signal) {
	name := fmt.Sprint(int(sig))
	for n, s := range signals {
		if s == sig {
			name = n
		}
	}
	_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
		Signal     string
		CoreDumped bool
		Error      string
		Lang       string
	}{name, false, "", ""}))
}
