package fleetlock

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
)

// tokenDomain starts every token's MAC input, so that a cluster key used
// for something else as well never yields a FleetLock token.
const tokenDomain = "kedge-fleetlock/v1\x00"

// MinKeyLen is the shortest cluster key accepted; a shorter one refuses
// every node of its cluster (as an unknown cluster would be refused).
const MinKeyLen = 16

// Token is the credential of one node of one cluster: the unpadded
// base64url HMAC-SHA256, keyed with the cluster's key, of
// "kedge-fleetlock/v1" NUL CLUSTER NUL NODE. It lets its holder ask for
// that node's reboot slot and release it, nothing else; the Coordinator
// still decides.
func Token(key []byte, cluster, node string) string {
	return base64.RawURLEncoding.EncodeToString(tokenMAC(key, cluster, node))
}

// tokenLen is the length of a token.
var tokenLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

func tokenMAC(key []byte, cluster, node string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tokenDomain))
	m.Write([]byte(cluster))
	m.Write([]byte{0})
	m.Write([]byte(node))
	return m.Sum(nil)
}

// BaseURL is the base_url of a node's Zincati config
// ([updates.fleet_lock] base_url): publicURL is where the handler is
// reached from the nodes, its prefix included (for example
// https://kedge.example:8443/fleetlock/). The result always ends in "/":
// Zincati resolves v1/pre-reboot against it, and without the slash the
// token, its last segment, would be dropped.
func BaseURL(publicURL, cluster, node, token string) string {
	return strings.TrimRight(publicURL, "/") + "/" + url.PathEscape(cluster) + "/" +
		url.PathEscape(node) + "/" + url.PathEscape(token) + "/"
}

// authFailure is why a request was not authenticated, for the audit line
// only: the client is told "authentication failed" whatever it is.
type authFailure string

func (a authFailure) Error() string { return string(a) }

// verifier checks tokens against the cluster keys.
type verifier struct {
	keys func(cluster string) ([]byte, error)
	// decoy keys the MAC computed when a cluster has no usable key, so
	// that an unknown cluster costs what a known one does.
	decoy []byte
}

func newVerifier(keys func(string) ([]byte, error)) *verifier {
	decoy := make([]byte, sha256.Size)
	_, _ = rand.Read(decoy) // never fails (crypto/rand panics instead)
	return &verifier{keys: keys, decoy: decoy}
}

// verify reports whether token is the cluster's token for node; its
// error (an authFailure) says why not, and never holds a key or a token.
func (v *verifier) verify(cluster, node, token string) error {
	key, why := v.key(cluster)
	want := tokenMAC(key, cluster, node)
	got, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil {
		got = nil
	}
	ok := hmac.Equal(got, want)
	switch {
	case why != "":
		return authFailure(why)
	case token == "":
		return authFailure("no token (none in the path, no bearer token)")
	case err != nil:
		return authFailure("malformed token (not unpadded base64url)")
	case !ok:
		return authFailure("bad token: not this cluster's token for this node")
	}
	return nil
}

// key is the cluster's key, or the decoy and why it is not usable.
func (v *verifier) key(cluster string) ([]byte, string) {
	if v.keys == nil {
		return v.decoy, "no cluster keys configured"
	}
	key, err := v.keys(cluster)
	switch {
	case err != nil:
		return v.decoy, "cluster key: " + err.Error()
	case len(key) == 0:
		return v.decoy, "unknown cluster"
	case len(key) < MinKeyLen:
		return v.decoy, fmt.Sprintf("the cluster's key is shorter than %d bytes", MinKeyLen)
	}
	return key, ""
}
