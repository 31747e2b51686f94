package fleetlock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kinds of the protocol's error values ({"kind": KIND, "value":
// TEXT}): a small fixed set, as the protocol asks (Zincati counts them in
// a metric and logs the value).
const (
	KindFailedAuth   = "failed_auth"    // 401: no token, a bad one, an unknown cluster
	KindNotFound     = "not_found"      // 404: not an endpoint under CLUSTER/NODE
	KindBadRequest   = "bad_request"    // 400, 405, 413: header, method, body
	KindUnknownNode  = "unknown_node"   // 403: the node or its client ID is not the inventory's
	KindFailedLock   = "failed_lock"    // 409: pre-reboot not granted (yet)
	KindFailedUnlock = "failed_unlock"  // 409: steady-state not acknowledged (yet)
	KindBusy         = "busy"           // 429, 503: being decided, or not decided in time
	KindInternal     = "internal_error" // 500: Kedge could not decide
)

// The outcomes of a request in its audit line.
const (
	OutcomeGranted = "granted" // 200
	OutcomeWaiting = "waiting" // asked again later: not granted yet, or being decided
	OutcomeRefused = "refused" // the request is wrong: auth, protocol, inventory
	OutcomeError   = "error"   // Kedge failed to decide
)

// DefaultPrefix is the path the handler is mounted at unless Options say
// otherwise.
const DefaultPrefix = "/fleetlock/"

// DefaultTimeout bounds a request's Coordinator call.
const DefaultTimeout = 20 * time.Second

// NodeInfo is what the inventory says of a node's FleetLock client.
type NodeInfo struct {
	// ClientID is the client_params.id the node's Zincati sends (its
	// app-specific machine ID); "" is a node not set up for FleetLock,
	// which is refused.
	ClientID string
	// Group is the reboot group the node's Zincati must send; "" is
	// DefaultGroup.
	Group string
}

// Request is an authenticated request of a node whose client ID is the
// inventory's: what the Coordinator decides on.
type Request struct {
	Cluster, Node   string
	ClientID, Group string
	Remote          string // the peer's address, for the Coordinator's own records
}

// Decision is the Coordinator's answer.
type Decision struct {
	Granted bool
	// Reason is why not (the client is told it), or a note on a grant
	// (audited only).
	Reason string
}

// Coordinator decides: the handler never grants anything on its own.
// Both calls may be repeated any number of times, in any order, as the
// protocol's operations are recursive.
type Coordinator interface {
	// PreReboot is RecursiveLock: Granted when the node holds a reboot
	// slot and has been cordoned and drained; otherwise a reason to wait
	// (slot busy, draining, window closed). Asking again while holding
	// the slot is granted again.
	PreReboot(ctx context.Context, r Request) (Decision, error)
	// SteadyState is UnlockIfHeld: Granted once the node holds no slot
	// (freed after it is uncordoned), or when it held none.
	SteadyState(ctx context.Context, r Request) (Decision, error)
}

// Options configure a Server. Every func must be safe for concurrent use.
type Options struct {
	// Prefix is the path the handler sees before CLUSTER/; "" is
	// DefaultPrefix.
	Prefix string
	// Keys gives a cluster's key; nil or empty for a cluster Kedge does
	// not know. Any error, a missing key and a key shorter than
	// MinKeyLen refuse as a bad token does. It is called for every
	// request, before it is authenticated: keep it a lookup in memory.
	Keys func(cluster string) ([]byte, error)
	// Nodes gives what the inventory says of a cluster's node; a zero
	// NodeInfo for a node it does not know. Nil: no node is set up.
	Nodes func(cluster, node string) (NodeInfo, error)
	// Coordinator decides; nil refuses everything with internal_error.
	Coordinator Coordinator
	// Logger gets one audit line per request; nil is slog.Default().
	Logger *slog.Logger
	// Timeout bounds a Coordinator call; 0 is DefaultTimeout.
	Timeout time.Duration
}

// Server is the FleetLock handler. It keeps no state that matters: which
// node holds a slot is the Coordinator's to know.
type Server struct {
	opts     Options
	prefix   string
	verifier *verifier
	log      *slog.Logger
	timeout  time.Duration

	mu       sync.Mutex
	deciding map[string]struct{} // CLUSTER NUL NODE of requests being decided
}

// New returns a Server for the options.
func New(o Options) *Server {
	s := &Server{opts: o, prefix: o.Prefix, verifier: newVerifier(o.Keys), log: o.Logger, timeout: o.Timeout,
		deciding: map[string]struct{}{}}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if !strings.HasPrefix(s.prefix, "/") {
		s.prefix = "/" + s.prefix
	}
	if !strings.HasSuffix(s.prefix, "/") {
		s.prefix += "/"
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	return s
}

// reply is what a request is answered and audited with.
type reply struct {
	status  int
	kind    string // "" when granted
	value   string // what the client is told
	outcome string
	reason  string // the audit line's reason; "" is value
}

func refused(status int, kind, value string) reply {
	return reply{status: status, kind: kind, value: value, outcome: OutcomeRefused}
}

// event is a request's audit line, filled in as the request is read.
type event struct {
	endpoint, cluster, node, clientID, group, remote string
	authenticated                                    bool
}

// ServeHTTP answers POST PREFIX CLUSTER/NODE/TOKEN/v1/{pre-reboot,
// steady-state}, or the same without TOKEN and with Authorization: Bearer
// TOKEN, and logs one audit line.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ev := event{remote: r.RemoteAddr}
	rep := s.safeServe(w, r, &ev)
	s.audit(&ev, rep) // before the answer: what a client was told is on record
	s.write(w, rep)
}

// safeServe turns a panic into an internal_error: bad input must never
// take the server down, nor reach a recoverer that logs the path (which
// holds the token).
func (s *Server) safeServe(w http.ResponseWriter, r *http.Request, ev *event) (rep reply) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			rep = reply{status: http.StatusInternalServerError, kind: KindInternal, value: "internal error",
				outcome: OutcomeError, reason: fmt.Sprintf("panic: %v", v)}
		}
	}()
	return s.serve(w, r, ev)
}

// serve checks a request in order, the token first, and asks the
// Coordinator only about a request that passed everything.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, ev *event) reply {
	t, err := parseTarget(s.prefix, r.URL.Path)
	ev.cluster, ev.node, ev.endpoint = t.Cluster, t.Node, t.Endpoint
	if err != nil {
		return refused(http.StatusNotFound, KindNotFound, err.Error())
	}
	token := t.Token
	if !t.TokenInPath {
		token = bearer(r.Header.Get("Authorization"))
	}
	if err := s.verifier.verify(t.Cluster, t.Node, token); err != nil {
		rep := refused(http.StatusUnauthorized, KindFailedAuth, "authentication failed")
		rep.reason = err.Error()
		return rep
	}
	ev.authenticated = true
	if r.Method != http.MethodPost {
		return refused(http.StatusMethodNotAllowed, KindBadRequest, "method not allowed: the protocol's requests are POST")
	}
	if strings.TrimSpace(r.Header.Get(ProtocolHeader)) != "true" {
		return refused(http.StatusBadRequest, KindBadRequest, "missing header "+ProtocolHeader+": true")
	}
	body, rep, ok := readBody(w, r)
	if !ok {
		return rep
	}
	cp, err := decodeParams(body)
	if err != nil {
		return refused(http.StatusBadRequest, KindBadRequest, err.Error())
	}
	ev.clientID, ev.group = cp.ID, cp.Group
	if rep, ok := s.checkNode(t, cp); !ok {
		return rep
	}
	return s.decide(r.Context(), t, Request{Cluster: t.Cluster, Node: t.Node, ClientID: cp.ID, Group: cp.Group, Remote: r.RemoteAddr})
}

// readBody reads at most MaxBody bytes of a request body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, reply, bool) {
	tooBig := refused(http.StatusRequestEntityTooLarge, KindBadRequest, "request body over "+strconv.Itoa(MaxBody)+" bytes")
	if r.ContentLength > MaxBody {
		return nil, tooBig, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooBig, false
	case err != nil:
		rep := refused(http.StatusBadRequest, KindBadRequest, "reading the request body failed")
		rep.reason = "reading the request body: " + err.Error()
		return nil, rep, false
	}
	return body, reply{}, true
}

// checkNode maps the client to the node through the inventory: the node
// must be set up for FleetLock, with this client ID and group.
func (s *Server) checkNode(t target, cp clientParams) (reply, bool) {
	var info NodeInfo
	if s.opts.Nodes != nil {
		var err error
		if info, err = s.opts.Nodes(t.Cluster, t.Node); err != nil {
			return reply{status: http.StatusInternalServerError, kind: KindInternal, value: "Kedge could not read its inventory; try again later",
				outcome: OutcomeError, reason: "inventory: " + err.Error()}, false
		}
	}
	if info.ClientID == "" {
		return refused(http.StatusForbidden, KindUnknownNode,
			fmt.Sprintf("node %s of cluster %s is not set up for FleetLock in Kedge's inventory", t.Node, t.Cluster)), false
	}
	if cp.ID != info.ClientID {
		rep := refused(http.StatusForbidden, KindUnknownNode,
			fmt.Sprintf("client_params.id is not the client ID Kedge's inventory holds for node %s", t.Node))
		rep.reason = fmt.Sprintf("client id %s is not the inventory's for node %s (%s)", cp.ID, t.Node, info.ClientID)
		return rep, false
	}
	group := info.Group
	if group == "" {
		group = DefaultGroup
	}
	if cp.Group != group {
		return refused(http.StatusForbidden, KindUnknownNode,
			fmt.Sprintf("node %s is in reboot group %q in Kedge's inventory, not %q", t.Node, group, cp.Group)), false
	}
	return reply{}, true
}

// decide asks the Coordinator, one request per node at a time.
func (s *Server) decide(ctx context.Context, t target, req Request) reply {
	if s.opts.Coordinator == nil {
		return reply{status: http.StatusInternalServerError, kind: KindInternal, value: "Kedge could not decide; try again later",
			outcome: OutcomeError, reason: "no coordinator configured"}
	}
	release, ok := s.hold(t)
	if !ok {
		return reply{status: http.StatusTooManyRequests, kind: KindBusy, outcome: OutcomeWaiting,
			value: "another request of node " + t.Node + " is being decided; try again later"}
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var d Decision
	var err error
	if t.Endpoint == EndpointPreReboot {
		d, err = s.opts.Coordinator.PreReboot(ctx, req)
	} else {
		d, err = s.opts.Coordinator.SteadyState(ctx, req)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return reply{status: http.StatusServiceUnavailable, kind: KindBusy, outcome: OutcomeError,
			value: "Kedge did not decide within " + s.timeout.String() + "; try again later", reason: "coordinator: " + err.Error()}
	case err != nil:
		return reply{status: http.StatusInternalServerError, kind: KindInternal, outcome: OutcomeError,
			value: "Kedge could not decide; try again later", reason: "coordinator: " + err.Error()}
	case d.Granted:
		return reply{status: http.StatusOK, outcome: OutcomeGranted, reason: d.Reason}
	}
	kind, why := KindFailedLock, "not granted yet"
	if t.Endpoint == EndpointSteadyState {
		kind, why = KindFailedUnlock, "the reboot slot is not released yet"
	}
	if d.Reason != "" {
		why = d.Reason
	}
	return reply{status: http.StatusConflict, kind: kind, value: why, outcome: OutcomeWaiting}
}

// hold marks the node's request as being decided, unless one already is.
func (s *Server) hold(t target) (release func(), ok bool) {
	key := t.Cluster + "\x00" + t.Node
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.deciding[key]; busy {
		return nil, false
	}
	s.deciding[key] = struct{}{}
	return func() {
		s.mu.Lock()
		delete(s.deciding, key)
		s.mu.Unlock()
	}, true
}

// protocolError is the protocol's error value.
type protocolError struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// write answers: 200 and {} for a grant, else the protocol's error value.
func (s *Server) write(w http.ResponseWriter, rep reply) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	switch rep.status {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="kedge-fleetlock"`)
	case http.StatusMethodNotAllowed:
		h.Set("Allow", http.MethodPost)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		h.Set("Retry-After", "10")
	}
	w.WriteHeader(rep.status)
	if rep.status == http.StatusOK {
		_, _ = w.Write([]byte("{}\n"))
		return
	}
	_ = json.NewEncoder(w).Encode(protocolError{Kind: rep.kind, Value: rep.value})
}

// audit logs a request's one audit line. Never a token, never the
// Authorization header, never the path (which holds the token).
func (s *Server) audit(ev *event, rep reply) {
	reason := rep.reason
	if reason == "" {
		reason = rep.value
	}
	cluster, node := ev.cluster, ev.node
	if !ev.authenticated {
		cluster, node = unlikeToken(cluster), unlikeToken(node)
	}
	args := []any{"audit", true, "endpoint", ev.endpoint, "cluster", cluster, "node", node,
		"clientId", ev.clientID, "group", ev.group, "remote", ev.remote, "authenticated", ev.authenticated,
		"outcome", rep.outcome, "status", rep.status}
	if rep.kind != "" {
		args = append(args, "kind", rep.kind)
	}
	if reason != "" {
		args = append(args, "reason", reason)
	}
	level := slog.LevelInfo
	switch rep.outcome {
	case OutcomeRefused:
		level = slog.LevelWarn
	case OutcomeError:
		level = slog.LevelError
	}
	what := ev.endpoint
	if what == "" {
		what = "request"
	}
	s.log.Log(context.Background(), level, "kedge fleetlock: "+what+" "+rep.outcome, args...)
}

// unlikeToken is a name a path claims, unless it could be a token (one
// put where the node belongs, by a wrong base URL or on purpose).
func unlikeToken(name string) string {
	if len(name) == tokenLen {
		if _, err := base64.RawURLEncoding.DecodeString(name); err == nil {
			return "(withheld: shaped like a token)"
		}
	}
	return name
}
