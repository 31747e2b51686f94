package etcdapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/sealstream"
)

// SnapshotProgress is the heartbeat of etcd.snapshot: bytes received of
// the snapshot's total.
type SnapshotProgress struct {
	Member string `json:"member"`
	Done   int64  `json:"done"`
	Total  int64  `json:"total"`
}

// snapshotSuffix and manifestSuffix end the names of a snapshot and of
// its manifest; stampLayout is the UTC time they start with, to the
// millisecond (a run takes well under a second: two in one second must
// not share a name). Names to the second (secondsLayout) are read too.
const (
	snapshotSuffix = ".snap.kseal"
	manifestSuffix = ".json"
	stampLayout    = "20060102T150405.000Z"
	secondsLayout  = "20060102T150405Z"
	// etcdHashSize is etcd's trailing sha256.
	etcdHashSize = sha256.Size
)

// snapshotStall is how long a member may send nothing in a snapshot
// (a variable for tests).
var snapshotStall = time.Minute

// Snapshot takes a snapshot of etcd (etcd.snapshot) from a healthy
// voting member through its maintenance API, checks it against etcd's
// own trailing sha256 and its size as it streams, seals it with the codec
// key (internal/sealstream) and stores it at the destination the run
// names (one the worker's inventory defines under backups:) with a
// manifest beside it; then deletes the cluster's older snapshots that the
// retention does not keep. The snapshot comes over etcd's gRPC API (as
// etcdctl's does), the rest through its JSON gateway. It is never held
// whole: one gRPC message and one sealed chunk at a time.
func (a *Activities) Snapshot(ctx context.Context, in etcd.SnapshotInput) (etcd.SnapshotResult, error) {
	cluster, keepFor, dest, err := a.checkSnapshotInput(in)
	if err != nil {
		return etcd.SnapshotResult{}, err
	}
	if a.Keys == nil {
		return etcd.SnapshotResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no codec key to seal the snapshot with: start it with --codec-key (or $KEDGE_CODEC_KEY)", errtype.NoSealKey, nil)
	}
	store, err := openStore(ctx, dest)
	if err != nil {
		return etcd.SnapshotResult{}, err
	}
	cl, err := a.client(ctx, etcd.RemoveMemberInput{Vault: in.Vault, Endpoints: in.Endpoints, CACert: in.CACert, Issuer: in.Issuer})
	if err != nil {
		return etcd.SnapshotResult{}, err
	}
	src, err := pickSource(ctx, cl, in.Endpoints, in.Member)
	if err != nil {
		return etcd.SnapshotResult{}, err
	}
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
			Revision number `json:"revision"`
		} `json:"header"`
		DBSize number `json:"dbSize"`
	}
	if err := cl.call(ctx, src.endpoint, "/v3/maintenance/status", map[string]any{}, &st); err != nil {
		return etcd.SnapshotResult{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s's status at %s: %v", src.name, src.endpoint, err), errtype.EtcdUnavailable, err)
	}
	if st.Header.MemberID != src.id {
		return etcd.SnapshotResult{}, temporal.NewApplicationError(fmt.Sprintf("%s answered as member %s, not %s", src.endpoint, hexID(st.Header.MemberID), src.name), errtype.EtcdUnavailable)
	}
	created := time.Now().UTC()
	name := fmt.Sprintf("%s/etcd/%s-rev%d", cluster, created.Format(stampLayout), int64(st.Header.Revision))
	res := etcd.SnapshotResult{Key: name + snapshotSuffix, Manifest: name + manifestSuffix, Member: src.name, Revision: int64(st.Header.Revision),
		KeyID: a.Keys.ActiveKey(), Members: src.members, Created: created.Format(time.RFC3339)}
	pulled, err := a.pullInto(ctx, cl, src, int64(st.DBSize), store, res.Key)
	if err != nil {
		return res, err
	}
	res.Size, res.SHA256, res.Stored = pulled.size, pulled.sha256, pulled.stored
	manifest, _ := json.MarshalIndent(etcd.Manifest{Cluster: cluster, Member: res.Member, Members: res.Members, Revision: res.Revision,
		Size: res.Size, SHA256: res.SHA256, KeyID: res.KeyID, Created: res.Created, Object: res.Key, StorageVersion: pulled.version}, "", "  ")
	if err := store.Put(ctx, res.Manifest, bytes.NewReader(append(manifest, '\n'))); err != nil {
		return res, storeError("store the manifest "+res.Manifest, err)
	}
	res.Deleted, err = retain(ctx, store, cluster, res.Key, in.KeepLast, keepFor, created)
	return res, err
}

// source is the member a snapshot comes from.
type source struct {
	name, id, endpoint string
	members            []string // every member's name
}

// pulled is what came through the pipe.
type pulled struct {
	size    int64
	sha256  string
	stored  int64
	version string // etcd's storage version
}

// pullInto streams the source's snapshot, sealed, into the store under
// key: a goroutine pulls and seals into a pipe that Put reads. A pull
// that fails (etcd's check included) fails the Put, so no object is
// stored; its error is the one returned.
func (a *Activities) pullInto(ctx context.Context, cl *client, src source, estimate int64, store objstore.Store, key string) (pulled, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pp := newPipe()
	type outcome struct {
		p   pulled
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		cw := &countWriter{w: pp}
		p, err := a.pull(ctx, cl, src, estimate, cw)
		p.stored = cw.n
		pp.closeWrite(err) // nil: Put reads io.EOF
		done <- outcome{p, err}
	}()
	putErr := store.Put(ctx, key, pp)
	pp.closeRead(errors.New("the store stopped reading")) // unblocks a pull Put gave up on
	if putErr != nil {
		cancel()
	}
	o := <-done
	var ae *temporal.ApplicationError
	switch {
	case errors.As(o.err, &ae):
		return o.p, o.err // the pull's own failure (which failed the Put)
	case putErr != nil:
		return o.p, storeError("store "+key, putErr)
	}
	return o.p, o.err
}

// snapshotStream opens etcd's Maintenance.Snapshot stream at endpoint
// (https://HOST:PORT: etcd serves gRPC and its JSON gateway on the same
// client port) over a connection of its own, with the client's
// certificate and trust, and no proxy (as the gateway's client).
// closeConn ends the connection.
func (c *client) snapshotStream(ctx context.Context, endpoint string) (stream etcdserverpb.Maintenance_SnapshotClient, closeConn func(), err error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, nil, err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(c.tls)), grpc.WithNoProxy())
	if err != nil {
		return nil, nil, err
	}
	stream, err = etcdserverpb.NewMaintenanceClient(conn).Snapshot(ctx, &etcdserverpb.SnapshotRequest{})
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return stream, func() { _ = conn.Close() }, nil
}

// pull reads the source's snapshot over etcd's gRPC API, one message at
// a time, and writes it sealed to out. It checks the snapshot's size
// against what etcd announced and etcd's trailing sha256 against the
// bytes before it; only then is the last chunk sealed, so a snapshot
// that fails never makes a whole sealed stream.
func (a *Activities) pull(ctx context.Context, cl *client, src source, estimate int64, out io.Writer) (pulled, error) {
	var p pulled
	// A member that stops sending is given up after snapshotStall, not
	// at the activity's timeout.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	stall := time.AfterFunc(snapshotStall, func() { stalled.Store(true); cancel() })
	defer stall.Stop()
	sw, err := sealstream.NewWriter(out, a.Keys)
	if err != nil {
		return p, temporal.NewNonRetryableApplicationError(err.Error(), errtype.NoSealKey, err)
	}
	// The stream lasts as long as the snapshot: bounded by ctx (the
	// activity's timeout), not by the client's per-request timeout.
	stream, closeConn, err := cl.snapshotStream(ctx, src.endpoint)
	if err != nil && stalled.Load() {
		err = fmt.Errorf("no answer within %s", snapshotStall)
	}
	if err != nil {
		return p, temporal.NewApplicationErrorWithCause(fmt.Sprintf("snapshot from %s at %s: %v", src.name, src.endpoint, err), errtype.EtcdUnavailable, err)
	}
	defer closeConn()
	body := &trailer{h: sha256.New()}
	total := int64(-1) // known from the first message
	beat := progressBeat(ctx, src.name)
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		} else if stalled.Load() {
			return p, temporal.NewApplicationError(fmt.Sprintf("snapshot from %s: nothing came for %s after %d bytes", src.name, snapshotStall, p.size), errtype.EtcdUnavailable)
		} else if err != nil {
			// etcd's own words (etcdserver: leader changed), or the
			// transport's.
			return p, temporal.NewApplicationErrorWithCause(fmt.Sprintf("snapshot from %s failed after %d bytes: %s", src.name, p.size, grpcstatus.Convert(err).Message()), errtype.EtcdUnavailable, err)
		}
		stall.Reset(snapshotStall)
		blob := msg.GetBlob()
		if total < 0 {
			// etcd announces the database's bytes left after each
			// message; its sha256 follows them.
			total = int64(len(blob)) + int64(msg.GetRemainingBytes()) + etcdHashSize
			p.version = msg.GetVersion()
		}
		body.Write(blob)
		if _, err := sw.Write(blob); err != nil {
			return p, err // the store stopped reading: Put's error says why
		}
		p.size += int64(len(blob))
		beat(p.size, max(total, estimate))
	}
	switch {
	case total < 0:
		return p, corrupt(src, "it sent no data")
	case p.size != total:
		return p, corrupt(src, fmt.Sprintf("it announced %d bytes and sent %d", total, p.size))
	case !body.matches():
		return p, corrupt(src, "its trailing sha256 does not match the bytes before it")
	}
	if err := sw.Close(); err != nil {
		return p, err
	}
	p.sha256 = hex.EncodeToString(body.whole())
	beat(p.size, p.size)
	return p, nil
}

func corrupt(src source, why string) error {
	return temporal.NewApplicationError(fmt.Sprintf("the snapshot from %s is corrupt, not stored: %s", src.name, why), errtype.EtcdSnapshotCorrupt)
}

// progressBeat heartbeats the bytes done, at most once a second (and
// the last call always).
func progressBeat(ctx context.Context, member string) func(done, total int64) {
	var last time.Time
	return func(done, total int64) {
		if !activity.IsActivity(ctx) || (time.Since(last) < time.Second && done != total) {
			return
		}
		last = time.Now()
		activity.RecordHeartbeat(ctx, SnapshotProgress{Member: member, Done: done, Total: total})
	}
}

// trailer hashes what is written to it but its last 32 bytes, which it
// keeps: etcd's sha256 of the snapshot before it.
type trailer struct {
	h    hash.Hash
	last [etcdHashSize]byte
	n    int
}

func (t *trailer) Write(p []byte) {
	if len(p) >= etcdHashSize {
		t.h.Write(t.last[:t.n])
		t.h.Write(p[:len(p)-etcdHashSize])
		t.n = copy(t.last[:], p[len(p)-etcdHashSize:])
		return
	}
	if over := t.n + len(p) - etcdHashSize; over > 0 {
		t.h.Write(t.last[:over])
		t.n = copy(t.last[:], t.last[over:t.n])
	}
	t.n += copy(t.last[t.n:], p)
}

func (t *trailer) matches() bool {
	return t.n == etcdHashSize && bytes.Equal(t.h.Sum(nil), t.last[:])
}

// whole is the sha256 of every byte written, the last 32 included (one
// pass over the bytes for both sums); only after matches.
func (t *trailer) whole() []byte {
	t.h.Write(t.last[:t.n])
	return t.h.Sum(nil)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// snapMember is a member as the list gives it, learners marked.
type snapMember struct {
	member
	IsLearner bool `json:"isLearner"`
}

// pickSource chooses the member to take the snapshot from: the one
// named, which must be a started voting member that answers for itself
// with no error or alarm and knows a leader; or, none named, the first
// such follower by name, else the leader. Refused, not retried, naming
// each member's problem, when there is none.
func pickSource(ctx context.Context, cl *client, endpoints []string, want string) (source, error) {
	var list []snapMember
	var lastErr error
	for _, e := range endpoints {
		var out struct {
			Members []snapMember `json:"members"`
		}
		if lastErr = cl.call(ctx, e, "/v3/cluster/member/list", map[string]any{}, &out); lastErr == nil {
			list = out.Members
			break
		}
	}
	if list == nil {
		return source{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("no etcd member answered (%s): %v", strings.Join(endpoints, ", "), lastErr), errtype.EtcdUnavailable, lastErr)
	}
	slices.SortFunc(list, func(a, b snapMember) int { return strings.Compare(a.Name, b.Name) })
	members := make([]member, len(list))
	var names []string
	for i, m := range list {
		members[i] = m.member
		names = append(names, displayName(m.member))
	}
	var alarms struct {
		Alarms []alarm `json:"alarms"`
	}
	_ = cl.call(ctx, endpoints[0], "/v3/maintenance/alarm", map[string]any{}, &alarms) // a member's alarm, when known, refuses it
	answers := statuses(ctx, cl, endpoints, members)
	var healthy []source
	var leader *source
	var problems []string
	for _, m := range list {
		why := sourceProblem(m, answers[m.ID], alarms.Alarms)
		if want != "" && m.Name == want && why != "" {
			return source{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("refusing a snapshot from %s: it %s", want, why), errtype.EtcdUnhealthy, nil)
		}
		if why != "" {
			problems = append(problems, displayName(m.member)+" "+why)
			continue
		}
		s := source{name: m.Name, id: m.ID, endpoint: answers[m.ID].endpoint, members: names}
		if want == m.Name {
			return s, nil
		}
		if answers[m.ID].status.Leader == m.ID {
			leader = &s
		} else {
			healthy = append(healthy, s)
		}
	}
	if want != "" {
		return source{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("etcd has no member named %s (members: %s)", want, strings.Join(names, ", ")), errtype.InvalidInput, nil)
	}
	if len(healthy) > 0 {
		return healthy[0], nil
	}
	if leader != nil {
		return *leader, nil
	}
	return source{}, temporal.NewNonRetryableApplicationError("no etcd member can give a snapshot: "+strings.Join(problems, "; "), errtype.EtcdUnhealthy, nil)
}

// sourceProblem says why m cannot give a snapshot ("" when it can).
func sourceProblem(m snapMember, ans answer, alarms []alarm) string {
	switch {
	case m.Name == "" || len(m.ClientURLs) == 0:
		return "has not started"
	case m.IsLearner:
		return "is a learner, not a voting member"
	case ans.err != nil:
		return "does not answer: " + ans.err.Error()
	case ans.endpoint == "":
		return "does not answer: no endpoint given answers for it and it has no client URL"
	case len(ans.status.Errors) > 0:
		return "reports " + strings.Join(ans.status.Errors, ", ")
	case ans.status.Leader == "" || ans.status.Leader == "0":
		return "knows no leader"
	}
	for _, al := range alarms {
		if al.MemberID == m.ID {
			return fmt.Sprintf("has the alarm %v raised", al.Alarm)
		}
	}
	return ""
}

func displayName(m member) string {
	if m.Name != "" {
		return m.Name
	}
	return "member " + hexID(m.ID)
}

// storeError classifies a destination's failure: a refusal is not
// retried.
func storeError(what string, err error) error {
	switch {
	case errors.Is(err, objstore.ErrDenied):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", what, err), errtype.ObjectStoreDenied, err)
	case errors.Is(err, objstore.ErrInvalidKey):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", what, err), errtype.InvalidInput, err)
	}
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s: %v", what, err), errtype.ObjectStore, err)
}

// snapshotName is a stored snapshot as its key names it.
type snapshotName struct {
	key      string
	created  time.Time
	revision int64
}

// parseSnapshotKey reads CLUSTER/etcd/TIMESTAMP-revN.snap.kseal under
// prefix; false for anything else.
func parseSnapshotKey(prefix, key string) (snapshotName, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || strings.Contains(rest, "/") {
		return snapshotName{}, false
	}
	rest, ok = strings.CutSuffix(rest, snapshotSuffix)
	if !ok {
		return snapshotName{}, false
	}
	stamp, rev, ok := strings.Cut(rest, "-rev")
	if !ok {
		return snapshotName{}, false
	}
	t, err := time.Parse(stampLayout, stamp)
	if err != nil {
		if t, err = time.Parse(secondsLayout, stamp); err != nil {
			return snapshotName{}, false
		}
	}
	n, err := strconv.ParseInt(rev, 10, 64)
	if err != nil || n < 0 {
		return snapshotName{}, false
	}
	return snapshotName{key: key, created: t, revision: n}, true
}

// retain deletes the cluster's snapshots (and their manifests) that
// neither the newest keepLast nor keepFor keeps, never keep itself, and
// returns their keys, oldest first. Neither set: none.
func retain(ctx context.Context, store objstore.Store, cluster, keep string, keepLast int, keepFor time.Duration, now time.Time) ([]string, error) {
	if keepLast <= 0 && keepFor <= 0 {
		return nil, nil
	}
	prefix := cluster + "/etcd/"
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return nil, storeError("list the snapshots under "+prefix, err)
	}
	var snaps []snapshotName
	for _, o := range objs {
		if s, ok := parseSnapshotKey(prefix, o.Key); ok {
			snaps = append(snaps, s)
		}
	}
	// Newest first.
	slices.SortFunc(snaps, func(a, b snapshotName) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return cmp.Compare(b.revision, a.revision)
	})
	var deleted []string
	for i, s := range snaps {
		if s.key == keep || (keepLast > 0 && i < keepLast) || (keepFor > 0 && now.Sub(s.created) < keepFor) {
			continue
		}
		// The manifest first: a snapshot left without one is still found
		// (and deleted) by the next run.
		manifest := strings.TrimSuffix(s.key, snapshotSuffix) + manifestSuffix
		if err := store.Delete(ctx, manifest); err != nil {
			return deleted, storeError("delete "+manifest, err)
		}
		if err := store.Delete(ctx, s.key); err != nil {
			return deleted, storeError("delete "+s.key, err)
		}
		deleted = append(deleted, s.key)
	}
	slices.Reverse(deleted)
	return deleted, nil
}
