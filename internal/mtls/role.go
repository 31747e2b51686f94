package mtls

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Role is what a certificate's holder may do on Kedge's Temporal server
// (cmd/kedge-temporal, which authorizes every call by it: see
// internal/temporalauth). It is the certificate subject's one
// organizational unit (OU), so `openssl x509 -subject` shows it.
type Role string

// The roles. A certificate with no role, or with more than one, may do
// nothing.
const (
	// RoleOperator starts, signals, updates (approves), cancels, resets
	// and terminates runs, manages schedules, and reads.
	RoleOperator Role = "operator"
	// RoleViewer reads: lists, describes, histories, queries; what the
	// Web UI displays.
	RoleViewer Role = "viewer"
	// RoleWorker polls the task queues its certificate names and answers
	// the tasks it got, and reads (the SDK fetches histories; chat.follow
	// describes and queries the run it follows).
	RoleWorker Role = "worker"
	// RoleSite is a site's worker (one that holds its queue's codec keys
	// alone): it polls the activity tasks of the queues its certificate
	// names and answers them, and reads; it never polls or answers a
	// workflow task, which would let it decide what runs.
	RoleSite Role = "site"
	// RoleAdmin is Temporal's administrator: namespaces, search
	// attributes, the admin service (`kedge setup`, the temporal CLI).
	RoleAdmin Role = "admin"
	// RoleSystem is the server's own certificate: Temporal's services to
	// one another and its system worker (schedules, batch operations).
	RoleSystem Role = "system"
)

// ClientRoles are the roles a client certificate may have (the server's
// is RoleSystem).
var ClientRoles = []Role{RoleOperator, RoleViewer, RoleWorker, RoleSite, RoleAdmin}

// DefaultClients are the programs of the team install that dial Temporal
// and the people who do, each made with the role it needs.
var DefaultClients = []string{"kedge-worker", "kedge-webhook", "kedge-setup", "temporal-ui", "temporal-admin", "operator", "viewer"}

// defaultRoles are the roles of DefaultClients: the worker works, the
// webhook starts and approves runs for chat users, `kedge setup` creates
// the namespace and its search attributes, the Web UI reads (whoever
// reaches it can do what its certificate can: it asks no login).
var defaultRoles = map[string]Role{
	"kedge-worker":   RoleWorker,
	"kedge-webhook":  RoleOperator,
	"kedge-setup":    RoleAdmin,
	"temporal-ui":    RoleViewer,
	"temporal-admin": RoleAdmin,
	"operator":       RoleOperator,
	"viewer":         RoleViewer,
}

// DefaultRole is the role a default client is made with ("" for a name
// that is not one).
func DefaultRole(name string) Role { return defaultRoles[name] }

// taskQueueURI prefixes a worker certificate's URI SANs, one per task
// queue it may poll (the queue's name path-escaped).
const taskQueueURI = "urn:kedge:task-queue:"

// Identity is who a certificate says its holder is.
type Identity struct {
	Name       string   `json:"name"` // the subject's CN
	Role       Role     `json:"role"`
	TaskQueues []string `json:"taskQueues,omitempty"` // a worker's or a site's
}

// ErrNoRole is returned by IdentityOf for a certificate that gives no
// single known role (one made before roles, or by another tool).
var ErrNoRole = errors.New("no Kedge role")

// IdentityOf reads the identity a certificate of this package's CA
// carries. The caller has verified the certificate against the CA: only
// the CA key's holder chooses what it says.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	id := Identity{Name: cert.Subject.CommonName}
	var roles []Role
	for _, ou := range cert.Subject.OrganizationalUnit {
		if r := Role(ou); slices.Contains(ClientRoles, r) || r == RoleSystem {
			roles = append(roles, r)
		}
	}
	if len(roles) != 1 {
		return id, fmt.Errorf("certificate CN=%q: %w (its OU must be one of operator, viewer, worker, admin, system; got %q)",
			id.Name, ErrNoRole, cert.Subject.OrganizationalUnit)
	}
	id.Role = roles[0]
	for _, u := range cert.URIs {
		rest, ok := strings.CutPrefix(u.String(), taskQueueURI)
		if !ok {
			continue
		}
		q, err := url.PathUnescape(rest)
		if err != nil || q == "" {
			return id, fmt.Errorf("certificate CN=%q: task queue URI %q: not a path-escaped name", id.Name, u)
		}
		id.TaskQueues = append(id.TaskQueues, q)
	}
	polls := id.Role == RoleWorker || id.Role == RoleSite
	if polls && len(id.TaskQueues) == 0 {
		return id, fmt.Errorf("certificate CN=%q: a %s's certificate names no task queue", id.Name, id.Role)
	}
	if !polls && len(id.TaskQueues) > 0 {
		return id, fmt.Errorf("certificate CN=%q: task queues on a %s's certificate", id.Name, id.Role)
	}
	return id, nil
}

// parseClient reads a --client entry: NAME or NAME:ROLE; a bare NAME must
// be a default client's.
func parseClient(s string) (string, Role, error) {
	name, role, hasRole := strings.Cut(s, ":")
	if !nameRe.MatchString(name) || name == "ca" || name == "server" {
		return "", "", fmt.Errorf("client name %q: lower-case letters, digits and dashes, not ca or server", name)
	}
	if !hasRole {
		r := DefaultRole(name)
		if r == "" {
			return "", "", fmt.Errorf("client %q: give its role, %s:ROLE with ROLE one of %s", name, name, roleList())
		}
		return name, r, nil
	}
	if !slices.Contains(ClientRoles, Role(role)) {
		return "", "", fmt.Errorf("client %q: role %q is not one of %s", name, role, roleList())
	}
	return name, Role(role), nil
}

func roleList() string {
	var s []string
	for _, r := range ClientRoles {
		s = append(s, string(r))
	}
	return strings.Join(s, ", ")
}

// taskQueueURIs are a worker certificate's SANs for its queues.
func taskQueueURIs(queues []string) ([]*url.URL, error) {
	var out []*url.URL
	for _, q := range queues {
		if q == "" || strings.TrimSpace(q) != q || len(q) > 1000 {
			return nil, fmt.Errorf("task queue %q: empty, padded or longer than 1000 bytes", q)
		}
		u, err := url.Parse(taskQueueURI + url.PathEscape(q))
		if err != nil {
			return nil, fmt.Errorf("task queue %q: %w", q, err)
		}
		out = append(out, u)
	}
	return out, nil
}
