package sshpool

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"kedge.dev/kedge/integration/sshtest"
)

// certServer starts a server presenting a host certificate signed by ca
// and writes its known_hosts from lines.
func certServer(t *testing.T, cfg sshtest.Config, lines func(s *sshtest.Server) []string) *sshtest.Server {
	t.Helper()
	srv := sshtest.Start(t, cfg)
	data := strings.Join(lines(srv), "\n") + "\n"
	if err := os.WriteFile(srv.KnownHostsFile, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv
}

// exact is the known_hosts pattern naming the server (host and port).
func exact(s *sshtest.Server) string { return knownhosts.Normalize(s.Addr()) }

func TestHostCertificateSignedByATrustedCA(t *testing.T) {
	ca := sshtest.NewSigner(t)
	for name, pattern := range map[string]func(*sshtest.Server) string{
		"exact":    exact,
		"wildcard": func(s *sshtest.Server) string { return strings.Replace(exact(s), "127.0.0.1", "127.0.0.*", 1) },
	} {
		t.Run(name, func(t *testing.T) {
			// known_hosts holds only the CA: the host's plain key is
			// unknown, so only the certificate can let us in.
			srv := certServer(t, sshtest.Config{HostCA: ca}, func(s *sshtest.Server) []string {
				return []string{sshtest.CertAuthorityLine(pattern(s), ca.PublicKey())}
			})
			p := New(Options{})
			defer p.Close()
			if out, err := run(t.Context(), p, sshTarget(srv), "echo ok"); err != nil || out != "ok\n" {
				t.Fatalf("%q %v", out, err)
			}
		})
	}
}

func TestHostCertificateIsPreferredOverAStaleKeyWhenACAIsTrusted(t *testing.T) {
	// known_hosts holds the CA and an RSA key the host no longer has: the
	// certificate algorithms are still offered, so the ed25519 host with
	// a certificate gets in.
	ca := sshtest.NewSigner(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := ssh.NewSignerFromKey(rsaKey)
	srv := certServer(t, sshtest.Config{HostCA: ca}, func(s *sshtest.Server) []string {
		return []string{
			knownhosts.Line([]string{exact(s)}, stale.PublicKey()),
			sshtest.CertAuthorityLine(exact(s), ca.PublicKey()),
		}
	})
	p := New(Options{})
	defer p.Close()
	if out, err := run(t.Context(), p, sshTarget(srv), "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestHostCertificateOfAnUnknownCAIsAMismatch(t *testing.T) {
	ca, trusted := sshtest.NewSigner(t), sshtest.NewSigner(t)
	srv := certServer(t, sshtest.Config{HostCA: ca}, func(s *sshtest.Server) []string {
		return []string{sshtest.CertAuthorityLine(exact(s), trusted.PublicKey())}
	})
	p := New(Options{})
	defer p.Close()
	_, err := run(t.Context(), p, sshTarget(srv), "true")
	var hk *HostKeyError
	if !errors.Is(err, ErrHostKeyMismatch) || !errors.As(err, &hk) || hk.Revoked || Retryable(err) {
		t.Fatalf("got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"worker-1", srv.Addr(), "signed by ssh-ed25519 " + ssh.FingerprintSHA256(ca.PublicKey()),
		"@cert-authority ssh-ed25519 " + ssh.FingerprintSHA256(trusted.PublicKey()), "no authorities"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if srv.Execs() != 0 {
		t.Error("a command ran on a host whose key did not check")
	}
}

func TestHostCertificateThatDoesNotCheckIsAMismatch(t *testing.T) {
	ca := sshtest.NewSigner(t)
	for _, c := range []struct {
		name, reason string
		cfg          sshtest.Config
	}{
		{"expired", "cert has expired", sshtest.Config{HostCA: ca, HostCertExpired: true}},
		{"another host's", "not in the set of valid principals", sshtest.Config{HostCA: ca, HostCertPrincipals: []string{"10.9.9.9"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := certServer(t, c.cfg, func(s *sshtest.Server) []string {
				return []string{sshtest.CertAuthorityLine(exact(s), ca.PublicKey())}
			})
			p := New(Options{})
			defer p.Close()
			_, err := run(t.Context(), p, sshTarget(srv), "true")
			if !errors.Is(err, ErrHostKeyMismatch) || Retryable(err) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestHostCertificateFallsBackToAKnownPlainKey(t *testing.T) {
	// As OpenSSH does: a certificate from a CA known_hosts does not trust
	// is checked as its plain key, which known_hosts holds.
	ca := sshtest.NewSigner(t)
	srv := certServer(t, sshtest.Config{HostCA: ca}, func(s *sshtest.Server) []string {
		return []string{
			sshtest.CertAuthorityLine(exact(s), sshtest.NewSigner(t).PublicKey()),
			knownhosts.Line([]string{exact(s)}, s.HostKey.PublicKey()),
		}
	})
	p := New(Options{})
	defer p.Close()
	if out, err := run(t.Context(), p, sshTarget(srv), "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestHostCertificateOfAnUnknownHostIsRefusedWithAdvice(t *testing.T) {
	ca := sshtest.NewSigner(t)
	srv := certServer(t, sshtest.Config{HostCA: ca}, func(*sshtest.Server) []string { return []string{"# no hosts"} })
	p := New(Options{})
	defer p.Close()
	_, err := run(t.Context(), p, sshTarget(srv), "true")
	var uh *UnknownHostError
	if !errors.Is(err, ErrHostUnknown) || !errors.As(err, &uh) || Retryable(err) {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), ssh.FingerprintSHA256(srv.HostKey.PublicKey())) || !strings.Contains(err.Error(), "ssh-keyscan") {
		t.Errorf("message %q", err)
	}
}

func TestRevokedHostCertificateIsRefused(t *testing.T) {
	ca := sshtest.NewSigner(t)
	for name, lines := range map[string]func(*sshtest.Server) []string{
		// The plain key is listed too: a certificate for a revoked key
		// must not fall back to it.
		"host key": func(s *sshtest.Server) []string {
			return []string{
				sshtest.CertAuthorityLine(exact(s), ca.PublicKey()),
				knownhosts.Line([]string{exact(s)}, s.HostKey.PublicKey()),
				sshtest.RevokedLine(s.HostKey.PublicKey()),
			}
		},
		"CA": func(s *sshtest.Server) []string {
			return []string{sshtest.CertAuthorityLine(exact(s), ca.PublicKey()), sshtest.RevokedLine(ca.PublicKey())}
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := certServer(t, sshtest.Config{HostCA: ca}, lines)
			p := New(Options{})
			defer p.Close()
			_, err := run(t.Context(), p, sshTarget(srv), "true")
			var hk *HostKeyError
			if !errors.As(err, &hk) || !hk.Revoked || Retryable(err) || !strings.Contains(err.Error(), "@revoked") {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestHostWithoutACertificateWhenOnlyACAIsTrusted(t *testing.T) {
	ca := sshtest.NewSigner(t)
	srv := certServer(t, sshtest.Config{}, func(s *sshtest.Server) []string {
		return []string{sshtest.CertAuthorityLine(exact(s), ca.PublicKey())}
	})
	p := New(Options{})
	defer p.Close()
	_, err := run(t.Context(), p, sshTarget(srv), "true")
	if !errors.Is(err, ErrHostKeyMismatch) || Retryable(err) || !strings.Contains(err.Error(), "@cert-authority ssh-ed25519 "+ssh.FingerprintSHA256(ca.PublicKey())) {
		t.Fatalf("got %v", err)
	}
}

func TestHostKeyAlgorithmsOfferCertificatesOnlyForATrustedCA(t *testing.T) {
	ed := sshtest.NewSigner(t).PublicKey()
	if got := hostKeyAlgorithms([]ssh.PublicKey{ed}); len(got) != 1 || got[0] != ssh.KeyAlgoED25519 {
		t.Errorf("plain key: %v", got)
	}
	got := hostKeyAlgorithms([]ssh.PublicKey{ed, authorityKey{ed}})
	if got[0] != ssh.CertAlgoED25519v01 || got[len(got)-1] != ssh.KeyAlgoED25519 {
		t.Errorf("CA and plain key: %v", got)
	}
}
