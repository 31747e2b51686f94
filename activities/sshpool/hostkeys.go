package sshpool

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"kedge.dev/kedge/actions/target"
)

// hostKeyCallback verifies host keys against t.KnownHostsFile. A key that
// differs from the recorded one is a *HostKeyError naming both
// fingerprints; a host with no entry is an *UnknownHostError. Host
// certificates are checked against the file's @cert-authority lines; as
// OpenSSH does, a certificate that does not check falls back to its plain
// key, unless it or its CA is marked @revoked. It also returns what
// known_hosts trusts for the host: its plain keys, and its CAs as
// authorityKey.
func hostKeyCallback(t target.SSH) (ssh.HostKeyCallback, []ssh.PublicKey, error) {
	cb, err := knownhosts.New(t.KnownHostsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: read known_hosts %s: %v: %w", t.Name(), t.KnownHostsFile, err, ErrConfig)
	}
	addr := probeAddr(t)
	cas, caLines := authorities(cb, t, addr)
	// knownhosts lists @cert-authority lines among the keys a host may
	// present: they are not.
	plain := func(keys []knownhosts.KnownKey) []ssh.PublicKey {
		out := make([]ssh.PublicKey, 0, len(keys))
		for _, k := range keys {
			if !caLines[string(k.Key.Marshal())] {
				out = append(out, k.Key)
			}
		}
		return out
	}
	known := plain(knownKeys(cb, t, addr))
	for _, ca := range cas {
		known = append(known, authorityKey{ca})
	}
	presented := func(key ssh.PublicKey) string { return describeKeys([]ssh.PublicKey{key})[0] }
	var verify ssh.HostKeyCallback
	verify = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		if err == nil {
			return nil
		}
		if cert, ok := key.(*ssh.Certificate); ok {
			if revoked(cb, hostname, remote, cert.Key) || revoked(cb, hostname, remote, cert.SignatureKey) {
				return &HostKeyError{Node: t.Name(), Address: hostPort(t), Presented: presented(cert),
					File: t.KnownHostsFile, Revoked: true}
			}
			// The certificate does not check: try its plain key.
			plainErr := verify(hostname, remote, cert.Key)
			var hk *HostKeyError
			var uh *UnknownHostError
			switch {
			case plainErr == nil:
				return nil
			case errors.As(plainErr, &hk) && !hk.Revoked:
				hk.Presented = fmt.Sprintf("%s (%v)", presented(cert), err)
			case errors.As(plainErr, &uh):
				uh.Presented = presented(cert)
			}
			return plainErr
		}
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			want := plain(ke.Want)
			for _, ca := range cas {
				want = append(want, authorityKey{ca})
			}
			if len(want) == 0 {
				scan := "ssh-keyscan " + t.Address
				if port(t) != target.DefaultPort {
					scan = "ssh-keyscan -p " + strconv.Itoa(port(t)) + " " + t.Address
				}
				return &UnknownHostError{Node: t.Name(), Address: hostPort(t), Presented: presented(key),
					File: t.KnownHostsFile, Scan: scan}
			}
			return &HostKeyError{Node: t.Name(), Address: hostPort(t), Presented: presented(key),
				Expected: describeKeys(want), File: t.KnownHostsFile}
		}
		var re *knownhosts.RevokedError
		if errors.As(err, &re) {
			return &HostKeyError{Node: t.Name(), Address: hostPort(t), Presented: presented(key),
				File: t.KnownHostsFile, Revoked: true}
		}
		return fmt.Errorf("%s: check host key: %v: %w", t.Name(), err, ErrConfig)
	}
	return verify, known, nil
}

func probeAddr(t target.SSH) *net.TCPAddr {
	addr := &net.TCPAddr{IP: net.ParseIP(t.Address), Port: port(t)}
	if addr.IP == nil {
		addr.IP = net.IPv4zero
	}
	return addr
}

// knownKeys asks the callback which keys known_hosts holds for the host
// (knownhosts has no direct query: a probe key that matches nothing makes
// it list them).
func knownKeys(cb ssh.HostKeyCallback, t target.SSH, addr net.Addr) []knownhosts.KnownKey {
	err := cb(hostPort(t), addr, probeKey{})
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return nil
	}
	return ke.Want
}

// authorities returns the @cert-authority keys known_hosts trusts for the
// host, revoked ones left out, and every CA key of the file (marshalled).
// knownhosts has no query for them either: each CA line of the file is
// tried with a probe certificate that claims the CA signed it; the
// callback verifies the signature only when the CA is trusted for the
// host.
func authorities(cb ssh.HostKeyCallback, t target.SSH, addr net.Addr) ([]ssh.PublicKey, map[string]bool) {
	all := map[string]bool{}
	data, err := os.ReadFile(t.KnownHostsFile)
	if err != nil {
		return nil, all
	}
	var cas []ssh.PublicKey
	for _, line := range bytes.Split(data, []byte("\n")) {
		marker, _, ca, _, _, err := ssh.ParseKnownHosts(line)
		if err != nil || marker != "cert-authority" {
			continue
		}
		all[string(ca.Marshal())] = true
		probe := &authorityProbe{PublicKey: ca}
		cert := &ssh.Certificate{Key: ca, CertType: ssh.HostCert, SignatureKey: probe, ValidBefore: ssh.CertTimeInfinity}
		_ = cb(hostPort(t), addr, cert)
		if probe.asked {
			cas = append(cas, ca)
		}
	}
	return cas, all
}

// authorityProbe is a CA key that records being asked to verify a
// signature.
type authorityProbe struct {
	ssh.PublicKey
	asked bool
}

func (p *authorityProbe) Verify([]byte, *ssh.Signature) error {
	p.asked = true
	return errors.New("probe")
}

// revoked reports whether known_hosts marks key @revoked.
func revoked(cb ssh.HostKeyCallback, hostname string, remote net.Addr, key ssh.PublicKey) bool {
	var re *knownhosts.RevokedError
	return errors.As(cb(hostname, remote, key), &re)
}

// authorityKey is a CA that known_hosts trusts for a host's certificates.
type authorityKey struct{ ssh.PublicKey }

// certAlgorithms are the host certificate algorithms offered when
// known_hosts trusts a CA for the host (any key type may be certified).
var certAlgorithms = []string{
	ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
	ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01, ssh.CertAlgoRSAv01,
}

// hostKeyAlgorithms are the algorithms to offer for what known_hosts
// trusts, so a host with several key types presents one we can check:
// certificates first when a CA is trusted, then the known keys' types.
func hostKeyAlgorithms(keys []ssh.PublicKey) []string {
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algos = append(algos, x)
			}
		}
	}
	for _, k := range keys {
		if _, ok := k.(authorityKey); ok {
			add(certAlgorithms...)
		}
	}
	for _, k := range keys {
		if _, ok := k.(authorityKey); ok {
			continue
		}
		switch typ := k.Type(); typ {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			add(typ)
		}
	}
	return algos
}

func describeKeys(keys []ssh.PublicKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		switch k := k.(type) {
		case authorityKey:
			out[i] = "@cert-authority " + k.Type() + " " + ssh.FingerprintSHA256(k.PublicKey)
		case *ssh.Certificate:
			out[i] = fmt.Sprintf("%s %s in a host certificate signed by %s %s",
				k.Key.Type(), ssh.FingerprintSHA256(k.Key), k.SignatureKey.Type(), ssh.FingerprintSHA256(k.SignatureKey))
		default:
			out[i] = k.Type() + " " + ssh.FingerprintSHA256(k)
		}
	}
	return out
}

// probeKey matches no key.
type probeKey struct{}

func (probeKey) Type() string                        { return "kedge-probe" }
func (probeKey) Marshal() []byte                     { return []byte("kedge-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe") }
