package etcdapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/sealstream"
)

// QuorumLost refuses a restore while etcd can still serve
// (etcd.quorum-lost): the members are listed as any member last knew
// them, each is asked for itself, and when a majority of them answers
// with a leader and no error, it fails (MajorityHealthy, not retried).
// No member answering at all is a lost quorum: the endpoints given are
// then the members.
func (a *Activities) QuorumLost(ctx context.Context, in etcd.QuorumLostInput) (etcd.QuorumLostResult, error) {
	if err := checkEndpoints(in.Endpoints); err != nil {
		return etcd.QuorumLostResult{}, err
	}
	cl, err := a.client(ctx, etcd.RemoveMemberInput{Vault: in.Vault, Endpoints: in.Endpoints, CACert: in.CACert, Issuer: in.Issuer})
	if err != nil {
		return etcd.QuorumLostResult{}, err
	}
	var members []member
	for _, e := range in.Endpoints {
		var out struct {
			Members []member `json:"members"`
		}
		if cl.call(ctx, e, "/v3/cluster/member/list", map[string]any{"linearizable": false}, &out) == nil {
			members = out.Members
			break
		}
	}
	res := etcd.QuorumLostResult{Members: []string{}, Healthy: []string{}}
	if members == nil {
		res.Members = append(res.Members, in.Endpoints...)
		res.Quorum = len(in.Endpoints)/2 + 1
		return res, nil
	}
	res, err = majorityVerdict(members, statuses(ctx, cl, in.Endpoints, members))
	if in.Rollback && errtype.Is(err, errtype.EtcdMajorityHealthy) {
		return res, nil // asked for: a rollback over a healthy etcd
	}
	return res, err
}

// majorityVerdict counts the members that answer healthy (for
// themselves, with a leader, no error) and refuses when they are a
// quorum of the members.
func majorityVerdict(members []member, answers map[string]answer) (etcd.QuorumLostResult, error) {
	res := etcd.QuorumLostResult{Members: []string{}, Healthy: []string{}, Quorum: len(members)/2 + 1}
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(displayName(a), displayName(b)) })
	var down []string
	for _, m := range members {
		name := displayName(m)
		res.Members = append(res.Members, name)
		ans, ok := answers[m.ID]
		if ok && ans.err == nil && len(ans.status.Errors) == 0 && ans.status.Leader != "" && ans.status.Leader != "0" {
			res.Healthy = append(res.Healthy, name)
		} else {
			down = append(down, name)
		}
	}
	if len(res.Healthy) >= res.Quorum {
		why := fmt.Sprintf("%d of etcd's %d members answer healthy (%s): a majority, so etcd has its quorum", len(res.Healthy), len(res.Members), strings.Join(res.Healthy, ", "))
		if len(down) > 0 {
			why += fmt.Sprintf(" without %s; replace a lost controller with controller-replace", strings.Join(down, ", "))
		}
		return res, temporal.NewNonRetryableApplicationError("refused: a restore while a majority is healthy would throw away everything written since the snapshot: "+why,
			errtype.EtcdMajorityHealthy, nil, res)
	}
	return res, nil
}

// RestorePlan reads what a restore would bring back
// (etcd.restore-plan): the snapshot named (latest or empty: the
// cluster's newest with a manifest), its manifest checked against its
// name, and the sealed object opened with the codec key (its header and
// first chunk authenticated, the key the manifest names); nothing is
// restored. It makes the restore's new cluster token.
func (a *Activities) RestorePlan(ctx context.Context, in etcd.RestorePlanInput) (etcd.RestorePlanResult, error) {
	if in.Snapshot == "latest" {
		in.Snapshot = ""
	}
	cluster, dest, err := a.checkDrillInput(etcd.RestoreDrillInput{Vault: in.Vault, Destination: in.Destination, Snapshot: in.Snapshot})
	if err != nil {
		return etcd.RestorePlanResult{}, err
	}
	if a.Keys == nil {
		return etcd.RestorePlanResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no codec key to open the snapshot with: start it with --codec-key (or $KEDGE_CODEC_KEY)", errtype.NoSealKey, nil)
	}
	store, err := openStore(ctx, dest)
	if err != nil {
		return etcd.RestorePlanResult{}, err
	}
	snap, err := pickDrillSnapshot(ctx, store, cluster, in.Snapshot)
	if err != nil {
		return etcd.RestorePlanResult{}, asRestoreError(err)
	}
	m, err := readManifest(ctx, store, cluster, snap.name)
	if err != nil {
		return etcd.RestorePlanResult{}, err
	}
	if err := a.opens(ctx, store, snap.name.key, m.KeyID); err != nil {
		return etcd.RestorePlanResult{}, err
	}
	created, err := time.Parse(time.RFC3339, m.Created)
	if err != nil {
		created = snap.name.created
	}
	age := time.Since(created).Round(time.Second)
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	return etcd.RestorePlanResult{Snapshot: snap.name.key, Created: created.UTC().Format(time.RFC3339), Age: age.String(), AgeSeconds: int64(age.Seconds()),
		Revision: m.Revision, Size: m.Size, Stored: snap.size, KeyID: m.KeyID, Members: append([]string{}, m.Members...),
		Token: "kedge-restore-" + hex.EncodeToString(token)}, nil
}

// opens checks the sealed object opens with a codec key the worker holds,
// the one its manifest names, by authenticating its first chunk.
func (a *Activities) opens(ctx context.Context, store objstore.Store, key, keyID string) error {
	rc, err := store.Get(ctx, key)
	if err != nil {
		return storeError("read "+key, err)
	}
	defer rc.Close()
	sr, err := sealstream.NewReader(rc, a.Keys)
	if err != nil {
		return sealError(key, err)
	}
	if keyID != "" && sr.KeyID() != keyID {
		return invalidSnapshot(key, fmt.Sprintf("it is sealed with key %q, its manifest says %q", sr.KeyID(), keyID))
	}
	if _, err := io.ReadFull(sr, make([]byte, 1)); err != nil {
		return sealError(key, err)
	}
	return nil
}

// asRestoreError gives a failure the drill's code typed as the drill's
// (no snapshot, a file it could not write) the restore's type, its
// message and retryability kept.
func asRestoreError(err error) error {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.EtcdDrillFailed) {
		return err
	}
	if ae.NonRetryable() {
		return temporal.NewNonRetryableApplicationError(ae.Message(), errtype.EtcdRestoreFailed, err)
	}
	return temporal.NewApplicationErrorWithCause(ae.Message(), errtype.EtcdRestoreFailed, err)
}
