package etcdapi

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/etcd"

	"kedge.dev/kedge/actions/errtype"
)

// AddMember adds a member to etcd (etcd.add-member) before its etcd
// starts, once the members can take it: the healthy ones must still be a
// quorum of the new size (a member added counts towards the quorum
// before it has started: with too few healthy ones, etcd would stop
// answering until it does). A member already there with the peer URL,
// started or not, is success, so a re-run goes on. The result is the
// membership and the initial cluster the new member starts with.
func (a *Activities) AddMember(ctx context.Context, in etcd.AddMemberInput) (etcd.AddMemberResult, error) {
	if err := checkAddInput(in); err != nil {
		return etcd.AddMemberResult{}, err
	}
	cl, err := a.client(ctx, etcd.RemoveMemberInput{Vault: in.Vault, Endpoints: in.Endpoints, CACert: in.CACert, Issuer: in.Issuer})
	if err != nil {
		return etcd.AddMemberResult{}, err
	}
	members, from, err := listMembers(ctx, cl, in.Endpoints)
	if err != nil {
		return etcd.AddMemberResult{}, err
	}
	for _, m := range members {
		if !slices.Contains(m.PeerURLs, in.PeerURL) {
			continue
		}
		if m.Name != "" && m.Name != in.Name {
			return etcd.AddMemberResult{}, invalid(fmt.Sprintf("the peer URL %s is etcd member %s's (%s), not %s's", in.PeerURL, m.Name, hexID(m.ID), in.Name))
		}
		res, err := addResult(members, m.ID, in)
		res.Healthy = len(answering(ctx, cl, in.Endpoints))
		return res, err
	}
	for _, m := range members {
		switch {
		case m.Name == in.Name:
			return etcd.AddMemberResult{}, invalid(fmt.Sprintf("etcd already has a member %s (%s) with the peer URLs %s, not %s: remove it first",
				in.Name, hexID(m.ID), strings.Join(m.PeerURLs, ", "), in.PeerURL))
		case m.Name == "":
			return etcd.AddMemberResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"etcd member %s (peer URLs %s) was added and has not started: start it, or remove it, before adding %s",
				hexID(m.ID), strings.Join(m.PeerURLs, ", "), in.Name), errtype.EtcdQuorum, nil)
		}
	}
	up := answering(ctx, cl, in.Endpoints)
	healthy, sick := 0, []string(nil)
	for _, m := range members {
		if up[m.ID] != "" {
			healthy++
		} else {
			sick = append(sick, m.Name)
		}
	}
	size := len(members) + 1
	if quorum := size/2 + 1; healthy < quorum {
		not := ""
		if len(sick) > 0 {
			not = " (not " + strings.Join(sick, ", ") + ")"
		}
		return etcd.AddMemberResult{Healthy: healthy}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"adding %s would make %d members, of which %d answer%s: a quorum of %d needs %d, and %s counts only once it has started; bring the others back first",
			in.Name, size, healthy, not, size, quorum, in.Name), errtype.EtcdQuorum, nil)
	}
	var out struct {
		Member  member   `json:"member"`
		Members []member `json:"members"`
	}
	// etcd refuses a change while a member has only just come back, or
	// too few are connected (its strict reconfiguration check): retried.
	if err := cl.call(ctx, from, "/v3/cluster/member/add", map[string]any{"peerURLs": []string{in.PeerURL}}, &out); err != nil {
		return etcd.AddMemberResult{Healthy: healthy}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("add %s (%s) through %s: %v", in.Name, in.PeerURL, from, err), errtype.EtcdUnavailable, err)
	}
	if len(out.Members) == 0 {
		out.Members = append(members, out.Member)
	}
	res, err := addResult(out.Members, out.Member.ID, in)
	res.Added, res.Healthy = true, healthy
	return res, err
}

func checkAddInput(in etcd.AddMemberInput) error {
	if err := checkEndpoints(in.Endpoints); err != nil {
		return err
	}
	if strings.TrimSpace(in.Name) == "" || strings.ContainsAny(in.Name, "=, \t\n") {
		return invalid(fmt.Sprintf("name %q is not an etcd member name", in.Name))
	}
	if u, err := url.Parse(in.PeerURL); err != nil || u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || u.Path != "" || strings.ContainsAny(in.PeerURL, ", ") {
		return invalid(fmt.Sprintf("peerURL %q is not https://HOST:PORT", in.PeerURL))
	}
	return nil
}

// addResult is the membership with the member id (the one added, or
// found with its peer URL) named in.Name.
func addResult(members []member, id string, in etcd.AddMemberInput) (etcd.AddMemberResult, error) {
	res := etcd.AddMemberResult{ID: hexID(id)}
	var initial []string
	for _, m := range members {
		name := m.Name
		if m.ID == id {
			name = cmp.Or(name, in.Name)
		}
		if name == "" {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"etcd member %s (peer URLs %s) has not started and has no name: the initial cluster cannot name it; start it, or remove it",
				hexID(m.ID), strings.Join(m.PeerURLs, ", ")), errtype.EtcdQuorum, nil)
		}
		res.Members = append(res.Members, name)
		for _, p := range m.PeerURLs {
			initial = append(initial, name+"="+p)
		}
	}
	slices.Sort(res.Members)
	slices.Sort(initial)
	res.InitialCluster = strings.Join(initial, ",")
	return res, nil
}
