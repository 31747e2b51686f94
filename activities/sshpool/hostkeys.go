package sshpool

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeyCallback verifies host keys against t.KnownHostsFile. A key that
// differs from the recorded one is a *HostKeyError naming both
// fingerprints; a host with no entry is an *UnknownHostError. It also
// returns the keys known_hosts holds for the host.
func hostKeyCallback(t Target) (ssh.HostKeyCallback, []ssh.PublicKey, error) {
	cb, err := knownhosts.New(t.KnownHostsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: read known_hosts %s: %v: %w", t.name(), t.KnownHostsFile, err, ErrConfig)
	}
	known := knownKeys(cb, t)
	verify := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				scan := "ssh-keyscan " + t.Address
				if t.port() != 22 {
					scan = "ssh-keyscan -p " + strconv.Itoa(t.port()) + " " + t.Address
				}
				return &UnknownHostError{Node: t.name(), Address: t.hostPort(), Presented: describeKeys([]ssh.PublicKey{key})[0],
					File: t.KnownHostsFile, Scan: scan}
			}
			want := make([]ssh.PublicKey, len(ke.Want))
			for i, w := range ke.Want {
				want[i] = w.Key
			}
			return &HostKeyError{Node: t.name(), Address: t.hostPort(), Presented: describeKeys([]ssh.PublicKey{key})[0],
				Expected: describeKeys(want), File: t.KnownHostsFile}
		}
		var re *knownhosts.RevokedError
		if errors.As(err, &re) {
			return &HostKeyError{Node: t.name(), Address: t.hostPort(), Presented: describeKeys([]ssh.PublicKey{key})[0],
				File: t.KnownHostsFile, Revoked: true}
		}
		return fmt.Errorf("%s: check host key: %v: %w", t.name(), err, ErrConfig)
	}
	return verify, known, nil
}

// knownKeys asks the callback which keys known_hosts holds for the host
// (knownhosts has no direct query: a probe key that matches nothing makes
// it list them).
func knownKeys(cb ssh.HostKeyCallback, t Target) []ssh.PublicKey {
	addr := &net.TCPAddr{IP: net.ParseIP(t.Address), Port: t.port()}
	if addr.IP == nil {
		addr.IP = net.IPv4zero
	}
	err := cb(t.hostPort(), addr, probeKey{})
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return nil
	}
	keys := make([]ssh.PublicKey, 0, len(ke.Want))
	for _, w := range ke.Want {
		keys = append(keys, w.Key)
	}
	return keys
}

// hostKeyAlgorithms are the algorithms to offer for the known keys, so a
// host with several key types presents one we can check.
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
		out[i] = k.Type() + " " + ssh.FingerprintSHA256(k)
	}
	return out
}

// probeKey matches no key.
type probeKey struct{}

func (probeKey) Type() string                        { return "kedge-probe" }
func (probeKey) Marshal() []byte                     { return []byte("kedge-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe") }
