package etcd

import "kedge.dev/kedge/actions/target"

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
}

// RemoveMemberResult says what was done.
type RemoveMemberResult struct {
	Removed bool `json:"removed"` // false: it was not a member (a second run)
	// Members are the members left, by name.
	Members []string `json:"members"`
	Healthy int      `json:"healthy"`
}
