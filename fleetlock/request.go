package fleetlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// The protocol's two endpoints, relative to a node's base URL, and their
// names in audit lines.
const (
	PreRebootPath       = "v1/pre-reboot"
	SteadyStatePath     = "v1/steady-state"
	EndpointPreReboot   = "pre-reboot"
	EndpointSteadyState = "steady-state"
)

// ProtocolHeader must be "true" on every request: the protocol's guard
// against requests that reach the server by an unintended redirect.
const ProtocolHeader = "fleet-lock-protocol"

// MaxBody is the most bytes of a request body read (Zincati's is under
// 200).
const MaxBody = 64 << 10

// DefaultGroup is the reboot group of a node whose inventory names none,
// and Zincati's default.
const DefaultGroup = "default"

var (
	// nameRE is a cluster or node name in a path: a Kubernetes node name
	// fits, and nothing that needs escaping does.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)
	// clientIDRE is a client ID. The protocol only says non-empty and
	// case-sensitive; Zincati sends its app-specific machine ID, 32
	// lowercase hex digits.
	clientIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	// groupRE is the protocol's group pattern, bounded.
	groupRE = regexp.MustCompile(`^[A-Za-z0-9.-]{1,128}$`)
)

// target is what a request's path says: the node it speaks for, its
// token when the path carries one, and the endpoint.
type target struct {
	Cluster, Node string
	Token         string
	TokenInPath   bool
	Endpoint      string // EndpointPreReboot or EndpointSteadyState
}

// errNoEndpoint is a path that is not one of the protocol's endpoints
// under a cluster and a node.
var errNoEndpoint = errors.New("not a FleetLock endpoint: want CLUSTER/NODE/TOKEN/v1/pre-reboot or .../v1/steady-state under the prefix")

// parseTarget reads PREFIX CLUSTER/NODE/TOKEN/v1/ENDPOINT or PREFIX
// CLUSTER/NODE/v1/ENDPOINT. On error, the target still holds the cluster
// and node the path claims when they are well-formed names (for the audit
// line), never its token.
func parseTarget(prefix, path string) (target, error) {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return target{}, errNoEndpoint
	}
	segs := strings.Split(rest, "/")
	var t target
	var version, op string
	switch {
	case len(segs) == 5 && segs[3] == "v1":
		t.Token, t.TokenInPath = segs[2], true
		version, op = segs[3], segs[4]
	case len(segs) == 4:
		version, op = segs[2], segs[3]
	default:
		return claimed(segs), errNoEndpoint
	}
	if !nameRE.MatchString(segs[0]) || !nameRE.MatchString(segs[1]) {
		return target{}, errNoEndpoint
	}
	t.Cluster, t.Node = segs[0], segs[1]
	switch {
	case version == "v1" && op == "pre-reboot":
		t.Endpoint = EndpointPreReboot
	case version == "v1" && op == "steady-state":
		t.Endpoint = EndpointSteadyState
	default:
		return target{Cluster: t.Cluster, Node: t.Node}, errNoEndpoint
	}
	return t, nil
}

// claimed is the cluster and node a path that is no endpoint names, when
// both are well-formed.
func claimed(segs []string) target {
	if len(segs) >= 2 && nameRE.MatchString(segs[0]) && nameRE.MatchString(segs[1]) {
		return target{Cluster: segs[0], Node: segs[1]}
	}
	return target{}
}

// bearer is the token of an "Authorization: Bearer TOKEN" header, or "".
func bearer(h string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// clientParams is what a request body says of its client.
type clientParams struct {
	ID, Group string
}

// decodeParams reads a request body: {"client_params": {"id": ID,
// "group": GROUP}}, one JSON value. Fields the protocol may add later are
// ignored.
func decodeParams(body []byte) (clientParams, error) {
	var b struct {
		ClientParams *struct {
			ID    *string `json:"id"`
			Group *string `json:"group"`
		} `json:"client_params"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return clientParams{}, fmt.Errorf(`malformed JSON body: %w (want {"client_params": {"id": ID, "group": GROUP}})`, err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return clientParams{}, errors.New("malformed JSON body: more than one value")
	}
	cp := b.ClientParams
	switch {
	case cp == nil:
		return clientParams{}, errors.New("client_params is missing")
	case cp.ID == nil || *cp.ID == "":
		return clientParams{}, errors.New("client_params.id is missing or empty")
	case !clientIDRE.MatchString(*cp.ID):
		return clientParams{}, errors.New("client_params.id is not 1 to 128 of A-Z a-z 0-9 . _ -")
	case cp.Group == nil || *cp.Group == "":
		return clientParams{}, errors.New("client_params.group is missing or empty")
	case !groupRE.MatchString(*cp.Group):
		return clientParams{}, errors.New("client_params.group is not 1 to 128 of A-Z a-z 0-9 . -")
	}
	return clientParams{ID: *cp.ID, Group: *cp.Group}, nil
}
