// Package fleetlock is the server side of FleetLock, the HTTP protocol
// by which Zincati, the update agent of Fedora CoreOS, asks for leave to
// reboot into a staged update (pre-reboot: RecursiveLock) and reports
// that it is back (steady-state: UnlockIfHeld). Kedge serves it on its
// webhook server so that a node's pre-reboot is granted only once a Kedge
// workflow has cordoned and drained that node; the decisions are the
// Coordinator's, an interface this package defines and never implements.
//
// # Requests
//
// Zincati's only setting is base_url, to which it appends v1/pre-reboot
// or v1/steady-state; it sends no credential of its own. So each node's
// base_url carries one (BaseURL renders it, always with a trailing slash,
// without which Zincati's URL resolution would drop the token):
//
//	POST PREFIX CLUSTER/NODE/TOKEN/v1/pre-reboot
//	POST PREFIX CLUSTER/NODE/TOKEN/v1/steady-state
//
// Other clients may send the token as "Authorization: Bearer TOKEN" to
// PREFIX CLUSTER/NODE/v1/... instead (in the path form, the header is
// ignored). TOKEN is Token(clusterKey, CLUSTER, NODE): an unpadded
// base64url HMAC-SHA256 over a fixed domain string, the cluster and the
// node, so a token is good for one node of one cluster and for nothing
// else, and the cluster's name is part of it even where two clusters share
// a key.
//
// A request is checked in this order, and the first check it fails
// answers it:
//
//  1. the path is an endpoint under CLUSTER/NODE (names of
//     A-Z a-z 0-9 . _ -, starting with a letter or digit);
//  2. the token is that node's, compared in constant time; an unknown
//     cluster, an unusable key, a token of another node or cluster and no
//     token at all are answered alike, so the answer tells nothing of
//     which clusters exist. Nothing but the path and the Authorization
//     header is looked at before this;
//  3. the method is POST, and the header fleet-lock-protocol is "true"
//     (the protocol's guard against requests that arrive by redirect);
//  4. the body, at most MaxBody bytes, is one JSON value
//     {"client_params": {"id": ID, "group": GROUP}}: ID 1 to 128 of
//     A-Z a-z 0-9 . _ - (the protocol asks only for a non-empty,
//     case-sensitive label; Zincati sends its app-specific machine ID, 32
//     hex digits), GROUP the protocol's ^[a-zA-Z0-9.-]+$ (at most 128);
//     other fields are ignored;
//  5. the inventory (Options.Nodes) sets the node up for FleetLock, with
//     this client ID and this group (DefaultGroup when it names none):
//     this is how a client is mapped to a node;
//  6. no other request of the node is being decided;
//  7. the Coordinator decides, within Options.Timeout.
//
// # Answers
//
// The protocol says that 200 is success and every other status a failed
// operation, and that errors should be JSON {"kind": KIND, "value": TEXT}
// with a 4xx or 5xx status and a kind of small, bounded cardinality. A
// grant is 200 with the body {}; anything else is one of these:
//
//	status  kind            when
//	401     failed_auth     no token, a bad one, an unknown cluster (step 2)
//	404     not_found       not an endpoint under CLUSTER/NODE (step 1)
//	405     bad_request     not POST (step 3)
//	400     bad_request     no fleet-lock-protocol: true; a malformed body (steps 3, 4)
//	413     bad_request     a body over MaxBody (step 4)
//	403     unknown_node    the node is not set up, or the client ID or group is not its (step 5)
//	429     busy            another request of the node is being decided (step 6)
//	409     failed_lock     pre-reboot not granted yet: the Coordinator's reason (step 7)
//	409     failed_unlock   steady-state not acknowledged yet: its reason (step 7)
//	503     busy            the Coordinator did not decide in time (step 7)
//	500     internal_error  the inventory or the Coordinator failed (steps 5, 7)
//
// Zincati asks again after every failure (every five minutes by default),
// whatever its kind. A 500's value is generic; the detail is in the log.
//
// Every request, authenticated or not, produces exactly one audit line
// (slog, "audit" true): endpoint, cluster and node (as the path claims
// them when unauthenticated), client ID, group, remote address,
// authenticated, outcome (granted, waiting, refused, error), status, kind
// and reason.
//
// # Never
//
// This package must never log a token, the Authorization header or a
// request's path (which holds the token), nor put one in an answer; its
// panics are recovered here, so that no recoverer further out logs the
// path. It must never answer 200 without the Coordinator's grant for that
// very request: not from a cache, not on an error, not with no
// Coordinator configured. It links no Temporal and no activity package:
// the Coordinator is handed in.
//
// The token sits in a URL: keep the webhook server's URLs out of any
// proxy's access log. A leaked token, together with the node's client ID,
// lets its holder ask for that one node's reboot slot (so Kedge may drain
// the node) or report it back; it never reboots a node, which only the
// node itself does, and never reaches another node or cluster.
package fleetlock
