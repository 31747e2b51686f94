package etcdapi

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/internal/objstore"
)

// drillTempDir is where a drill or a restore makes its directory ("":
// $TMPDIR; a variable for tests).
var drillTempDir = ""

// Bounds of the drill's input and of what it reads before it trusts it.
const (
	maxExpectKeys   = 100
	maxExpectKeyLen = 1024
	maxManifestSize = 64 << 10
)

// RestoreDrill restores a stored snapshot into a throwaway etcd on the
// worker (etcd.restore-drill) and checks it: the cluster's newest
// snapshot (or the one named) is streamed from the destination through
// sealstream's Reader to a file of its own (0600, in a directory made for
// the drill under $TMPDIR), checked against its manifest (size, sha256, key id) and
// etcd's own trailing sha256, restored with etcd's own code (etcdutl) and
// started as a single member on loopback (random ports, mutual TLS with
// a CA made for the drill); it must answer with at least the manifest's
// revision and hold every key expected. Then it is stopped and the
// directory removed, whatever happened. The snapshot is never held whole
// in memory.
func (a *Activities) RestoreDrill(ctx context.Context, in etcd.RestoreDrillInput) (etcd.RestoreDrillResult, error) {
	cluster, dest, err := a.checkDrillInput(in)
	if err != nil {
		return etcd.RestoreDrillResult{}, err
	}
	if a.Keys == nil {
		return etcd.RestoreDrillResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no codec key to open the snapshot with: start it with --codec-key (or $KEDGE_CODEC_KEY)", errtype.NoSealKey, nil)
	}
	store, err := openStore(ctx, dest)
	if err != nil {
		return etcd.RestoreDrillResult{}, err
	}
	snap, err := pickDrillSnapshot(ctx, store, cluster, in.Snapshot)
	if err != nil {
		return etcd.RestoreDrillResult{}, err
	}
	m, err := readManifest(ctx, store, cluster, snap.name)
	if err != nil {
		return etcd.RestoreDrillResult{}, err
	}
	created, err := time.Parse(time.RFC3339, m.Created)
	if err != nil {
		created = snap.name.created
	}
	age := time.Since(created).Round(time.Second)
	res := etcd.RestoreDrillResult{Snapshot: snap.name.key, Created: created.UTC().Format(time.RFC3339), Age: age.String(), AgeSeconds: int64(age.Seconds()),
		Size: m.Size, Stored: snap.size, KeyID: m.KeyID, ManifestRevision: m.Revision, Found: []string{}, Missing: []string{}}

	work, err := newScratch(drillTempDir, "drill")
	if err != nil {
		return res, temporal.NewApplicationErrorWithCause(fmt.Sprintf("a directory for the drill: %v", err), errtype.EtcdDrillFailed, err)
	}
	defer work.remove()
	dir := work.dir
	prog := startDrillProgress(ctx, snap.name.key, snap.size)
	defer prog.stop()

	start := time.Now()
	path := filepath.Join(dir, "snapshot.db")
	if err := a.fetchSnapshot(ctx, store, snap, m, path, prog); err != nil {
		return res, err
	}
	res.FetchMillis = time.Since(start).Milliseconds()
	start = time.Now()
	prog.setPhase(phaseRestore)
	got, err := drillRestore(ctx, dir, path, in.ExpectKeys)
	if err != nil {
		return res, err
	}
	res.RestoreMillis = time.Since(start).Milliseconds()
	res.Revision, res.Keys = got.revision, got.keys
	for _, k := range in.ExpectKeys {
		if got.found[k] {
			res.Found = append(res.Found, k)
		} else {
			res.Missing = append(res.Missing, k)
		}
	}
	prog.setPhase(phaseDone)
	switch {
	case res.Revision < res.ManifestRevision:
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the etcd restored from %s answers at revision %d, older than its manifest's %d",
			res.Snapshot, res.Revision, res.ManifestRevision), errtype.EtcdDrillFailed, nil, res)
	case len(res.Missing) > 0:
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the etcd restored from %s lacks %d of the %d keys expected: %s",
			res.Snapshot, len(res.Missing), len(in.ExpectKeys), strings.Join(quoteAll(res.Missing), ", ")), errtype.EtcdDrillFailed, nil, res)
	}
	return res, nil
}

func quoteAll(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%q", k)
	}
	return out
}

// checkDrillInput refuses what the drill cannot use before anything is
// read, and returns the cluster and the destination the worker's
// operator defined under the name the run gives.
func (a *Activities) checkDrillInput(in etcd.RestoreDrillInput) (string, etcd.Destination, error) {
	var none etcd.Destination
	cluster := in.Vault.Cluster
	if cluster == "" || strings.Contains(cluster, "/") || objstore.ValidKey(cluster) != nil {
		return "", none, invalid(fmt.Sprintf("cluster %q cannot name snapshots: letters, digits, '.', '_' and '-', starting with a letter or digit", cluster))
	}
	if in.Snapshot != "" {
		key := snapshotKey(cluster, in.Snapshot)
		if _, ok := parseSnapshotKey(cluster+"/etcd/", key); !ok || objstore.ValidKey(key) != nil {
			return "", none, invalid(fmt.Sprintf("snapshot %q is not one of %s's snapshots: want %s/etcd/TIMESTAMP-revN%s or its name", in.Snapshot, cluster, cluster, snapshotSuffix))
		}
	}
	if len(in.ExpectKeys) > maxExpectKeys {
		return "", none, invalid(fmt.Sprintf("expectKeys has %d keys: at most %d", len(in.ExpectKeys), maxExpectKeys))
	}
	for i, k := range in.ExpectKeys {
		if err := checkExpectKey(k); err != nil {
			return "", none, invalid(fmt.Sprintf("expectKeys[%d]: %v", i, err))
		}
	}
	dest, err := a.destination(cluster, in.Destination)
	return cluster, dest, err
}

// checkExpectKey accepts a key of 1 to maxExpectKeyLen bytes of
// printable UTF-8 (no NUL, no control character, no line break).
func checkExpectKey(k string) error {
	switch {
	case k == "":
		return errors.New("empty")
	case len(k) > maxExpectKeyLen:
		return fmt.Errorf("%d bytes, at most %d", len(k), maxExpectKeyLen)
	case !utf8.ValidString(k):
		return fmt.Errorf("%q is not UTF-8", k)
	}
	for _, r := range k {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%q holds %U, which is not printable", k, r)
		}
	}
	return nil
}

// snapshotKey is the object key of a snapshot named by its key or by its
// name under CLUSTER/etcd/.
func snapshotKey(cluster, s string) string {
	if strings.Contains(s, "/") {
		return s
	}
	return cluster + "/etcd/" + s
}

// storedSnapshot is a snapshot in the store and its sealed size.
type storedSnapshot struct {
	name snapshotName
	size int64
}

// pickDrillSnapshot finds the snapshot to restore: the one named, else
// the cluster's newest that has its manifest (one without is still being
// written, or being deleted). None is a failed drill, not retried.
func pickDrillSnapshot(ctx context.Context, store objstore.Store, cluster, want string) (storedSnapshot, error) {
	prefix := cluster + "/etcd/"
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return storedSnapshot{}, storeError("list the snapshots under "+prefix, err)
	}
	manifests := map[string]bool{}
	var snaps []storedSnapshot
	for _, o := range objs {
		if s, ok := parseSnapshotKey(prefix, o.Key); ok {
			snaps = append(snaps, storedSnapshot{name: s, size: o.Size})
		} else if strings.HasSuffix(o.Key, manifestSuffix) {
			manifests[o.Key] = true
		}
	}
	if want != "" {
		key := snapshotKey(cluster, want)
		if i := slices.IndexFunc(snaps, func(s storedSnapshot) bool { return s.name.key == key }); i >= 0 {
			return snaps[i], nil
		}
		return storedSnapshot{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no snapshot %s in the destination", key), errtype.EtcdDrillFailed, nil)
	}
	// Newest first, as retention orders them.
	slices.SortFunc(snaps, func(a, b storedSnapshot) int {
		if c := b.name.created.Compare(a.name.created); c != 0 {
			return c
		}
		return cmp.Compare(b.name.revision, a.name.revision)
	})
	for _, s := range snaps {
		if manifests[manifestKey(s.name.key)] {
			return s, nil
		}
	}
	if len(snaps) > 0 {
		return storedSnapshot{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("none of the %d snapshots under %s has its manifest (the newest: %s)",
			len(snaps), prefix, snaps[0].name.key), errtype.EtcdDrillFailed, nil)
	}
	return storedSnapshot{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no snapshot of cluster %s in the destination (nothing under %s): a backup that cannot be restored is no backup",
		cluster, prefix), errtype.EtcdDrillFailed, nil)
}

func manifestKey(snapshot string) string {
	return strings.TrimSuffix(snapshot, snapshotSuffix) + manifestSuffix
}

// readManifest reads the snapshot's manifest (at most maxManifestSize)
// and checks it names this snapshot, its cluster and revision, and a
// size and sha256 a snapshot can have.
func readManifest(ctx context.Context, store objstore.Store, cluster string, snap snapshotName) (etcd.Manifest, error) {
	key := manifestKey(snap.key)
	rc, err := store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return etcd.Manifest{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the snapshot %s has no manifest %s: it cannot be checked", snap.key, key), errtype.EtcdSnapshotInvalid, err)
	}
	if err != nil {
		return etcd.Manifest{}, storeError("read the manifest "+key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestSize+1))
	if err != nil {
		return etcd.Manifest{}, storeError("read the manifest "+key, err)
	}
	bad := func(why string) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the manifest %s %s", key, why), errtype.EtcdSnapshotInvalid, nil)
	}
	var m etcd.Manifest
	if len(data) > maxManifestSize {
		return m, bad(fmt.Sprintf("is over %d bytes", maxManifestSize))
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, bad(fmt.Sprintf("is not JSON: %v", err))
	}
	sum, err := hex.DecodeString(m.SHA256)
	switch {
	case m.Object != snap.key:
		return m, bad(fmt.Sprintf("names the object %q, not %s", m.Object, snap.key))
	case m.Cluster != cluster:
		return m, bad(fmt.Sprintf("names the cluster %q, not %s", m.Cluster, cluster))
	case m.Revision != snap.revision:
		return m, bad(fmt.Sprintf("records revision %d, its snapshot's name %d", m.Revision, snap.revision))
	case m.Size <= etcdHashSize:
		return m, bad(fmt.Sprintf("records a size of %d bytes: no etcd snapshot is that small", m.Size))
	case err != nil || len(sum) != etcdHashSize:
		return m, bad(fmt.Sprintf("records %q as the sha256", m.SHA256))
	}
	return m, nil
}
