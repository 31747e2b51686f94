package etcd

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// RemoveMemberAction is the action name of RemoveMember.
const RemoveMemberAction = "etcd.remove-member"

// RemoveMemberInput names the member to remove and the members to ask.
type RemoveMemberInput struct {
	Vault     target.Vault `json:"vault"`
	Member    string       `json:"member" kedge:"required" doc:"the member's name (host.layout's etcd.name)"`
	Endpoints []string     `json:"endpoints" kedge:"required" doc:"client URLs of the other members, e.g. https://10.0.0.12:2379"`
	CACert    string       `json:"caCert" kedge:"required" doc:"etcd's CA (PEM): the members' certificates must chain to it"`
	Issuer    string       `json:"issuer" kedge:"required" doc:"etcd's CA's Vault issuer: Kedge's client certificate comes from it"`
	// DryRun checks the member could be removed and removes nothing.
	DryRun bool `json:"dryRun,omitempty" doc:"only check the member could be removed (before anything changes)"`
	// Lost says the member's host is gone (powered off, unreachable): it
	// is refused while the member still answers as itself, at one of its
	// own client URLs or at an endpoint given.
	Lost bool `json:"lost,omitempty" doc:"the member's host is gone: refuse, before anything changes, while the member still answers at any of its own client URLs or the endpoints given (a live controller is taken out by node-remove)"`
}

// RemoveMemberResult says what was done.
type RemoveMemberResult struct {
	Removed bool `json:"removed"` // false: it was not a member (a second run), or a dry run
	// Found says the member was one of etcd's when asked.
	Found bool `json:"found"`
	// Members are the members left, by name ("" for one added that has
	// not started).
	Members []string `json:"members"`
	Healthy int      `json:"healthy"`
	// URLs are the member's peer and client URLs as etcd listed them
	// (when found): what other controllers' files name it by.
	URLs []string `json:"urls,omitempty"`
}

// AddMemberAction is the action name of AddMember.
const AddMemberAction = "etcd.add-member"

// AddMemberInput names the member to add and the members to ask, as
// etcd.remove-member does.
type AddMemberInput struct {
	Vault     target.Vault `json:"vault"`
	Endpoints []string     `json:"endpoints" kedge:"required" doc:"client URLs of the members, e.g. https://10.0.0.12:2379"`
	CACert    string       `json:"caCert" kedge:"required" doc:"etcd's CA (PEM): the members' certificates must chain to it"`
	Issuer    string       `json:"issuer" kedge:"required" doc:"etcd's CA's Vault issuer: Kedge's client certificate comes from it"`
	Name      string       `json:"name" kedge:"required" doc:"the new member's name (its ETCD_NAME / --name), named in initialCluster"`
	PeerURL   string       `json:"peerURL" kedge:"required" doc:"the new member's peer URL, https://HOST:2380, as its etcd will advertise it"`
}

// AddMemberResult is etcd's membership with the new member, and the
// initial cluster the new member starts with.
type AddMemberResult struct {
	// Added is false when a member with the peer URL was already there
	// (a second run).
	Added bool `json:"added"`
	// ID is the new member's id in hex, as etcdctl shows it.
	ID string `json:"id"`
	// Members are every member, by name, the new one included.
	Members []string `json:"members"`
	// InitialCluster is "name=peerURL,..." of every member, the new one
	// under its name: what etcd's --initial-cluster and
	// ETCD_INITIAL_CLUSTER want (with state existing).
	InitialCluster string `json:"initialCluster"`
	// Healthy is how many members answered before the add.
	Healthy int `json:"healthy"`
}

func init() {
	spec.Register(spec.Row{Name: RemoveMemberAction, Doc: "remove a member from etcd through its API (a 10-minute client certificate from etcd's CA in Vault), refusing when the members left would be none or their healthy ones short of a quorum, and with lost while the member still answers as itself (its host is not gone); a member already gone is success",
		In: RemoveMemberInput{}, Out: RemoveMemberResult{}, Timeout: 2 * time.Minute,
		Summary: `{{if .Flag "dryRun"}}check etcd keeps a quorum without {{.In "member"}}{{else}}remove etcd member {{.In "member"}}{{end}}`})
}

func init() {
	spec.Register(spec.Row{Name: AddMemberAction, Doc: "add a member to etcd through its API (a 10-minute client certificate from etcd's CA in Vault) before its etcd starts, refusing, not retried, unless the healthy members stay a quorum of the new size (the new member counts before it starts), when another member was added and never started, or when its name or peer URL is another member's; a member already there with the peer URL (started or not) is success; gives the initial cluster (name=peerURL,...) the new member starts with",
		In: AddMemberInput{}, Out: AddMemberResult{}, Timeout: 2 * time.Minute,
		Summary: `add etcd member {{.In "name"}}`})
}
