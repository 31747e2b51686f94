package kube

import "fmt"

// Etcd is etcd as a plan lists it among what runs.
const Etcd = "etcd"

// etcdMinimum is, from a Kubernetes release on, the oldest etcd release
// its API server supports (Kedge's table, newest first). An upgrade that
// needs a newer etcd is refused: etcd's own upgrade is a stage of its own
// (member by member, health-gated), never implied by this one.
var etcdMinimum = []struct {
	from, etcd Version
}{
	{Version{Major: 1, Minor: 31}, Version{Major: 3, Minor: 5}},
}

// EtcdNeeded is the oldest etcd release target's API server supports;
// ok is false when Kedge's table says nothing for it.
func EtcdNeeded(target Version) (Version, bool) {
	for _, e := range etcdMinimum {
		if target.Compare(e.from) >= 0 {
			return e.etcd, true
		}
	}
	return Version{}, false
}

// EtcdSkew checks etcd's members (the release each says it runs) against
// what target's API server needs: one problem per member too old or
// whose release cannot be read.
func EtcdSkew(target Version, members []EtcdMember) []string {
	need, ok := EtcdNeeded(target)
	if !ok {
		return nil
	}
	var problems []string
	for _, m := range members {
		v, err := ParseVersion(m.Version)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("etcd member %s says it runs %q: not a release Kedge can read", m.Name, m.Version))
		case v.Compare(need) < 0:
			problems = append(problems, fmt.Sprintf("etcd member %s runs %s, and the API server of %s needs etcd %d.%d or newer: upgrade etcd first (the etcd-upgrade runbook, member by member)",
				m.Name, m.Version, target, need.Major, need.Minor))
		}
	}
	return problems
}
