package etcd

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// HealthAction is the action name of Health.
const HealthAction = "etcd.health"

// HealthInput names the members to ask and how to reach them, as
// etcd.remove-member does.
type HealthInput struct {
	Vault     target.Vault `json:"vault"`
	Endpoints []string     `json:"endpoints" kedge:"required" doc:"client URLs of members to ask, e.g. https://10.0.0.11:2379 (any one lists the members; each answers for itself)"`
	CACert    string       `json:"caCert" kedge:"required" doc:"etcd's CA (PEM): the members' certificates must chain to it (during a rotation, the bundle of both)"`
	Issuer    string       `json:"issuer" kedge:"required" doc:"etcd's CA's Vault issuer: Kedge's client certificate comes from it"`
	// ExpectMembers, when set, is how many members etcd must have.
	ExpectMembers int `json:"expectMembers,omitempty" doc:"refuse unless etcd has exactly this many members (0: any number)"`
	// Wait keeps asking, while etcd is not healthy, for this long: after
	// a member's restart, until it is back with its peers.
	Wait string `json:"wait,omitempty" kedge:"duration" doc:"keep asking for this long while etcd is not healthy (after a member's restart); refuse after (default: refuse at once)"`
	// Member and Version: the member named must say it runs Version
	// (after its upgrade); with Wait, it is waited for.
	Member  string `json:"member,omitempty" doc:"with version: the member (by name) that must run it, e.g. after its upgrade"`
	Version string `json:"version,omitempty" doc:"with member: the release the member must say it runs, e.g. 3.6.16 (a leading v is fine)"`
}

// MemberHealth is one member as it answered for itself.
type MemberHealth struct {
	Name string `json:"name"`
	// ID is the member's id in hex, as etcdctl shows it.
	ID string `json:"id"`
	// Endpoint is the client URL that answered for the member.
	Endpoint  string `json:"endpoint"`
	Leader    bool   `json:"leader"`
	RaftIndex int64  `json:"raftIndex"`
	DBSize    int64  `json:"dbSize"`
	// Version is the release the member runs, as it says (e.g. 3.6.16).
	Version string `json:"version"`
}

// HealthResult is every member, all of them healthy, and the leader's
// name.
type HealthResult struct {
	Members []MemberHealth `json:"members"`
	Leader  string         `json:"leader"`
}

func init() {
	spec.Register(spec.Row{Name: HealthAction, Doc: "check every etcd member is healthy through its API (a 10-minute client certificate from etcd's CA in Vault): each member answers for itself with no error or alarm, one leader all agree on, and with expectMembers that many members; refused otherwise, not retried, naming each problem (with wait, only once it has not become healthy within that time)",
		In: HealthInput{}, Out: HealthResult{}, Timeout: 10 * time.Minute,
		Summary: `check every etcd member is healthy{{with .In "member"}} and {{.}} runs {{$.In "version"}}{{end}}`})
}
