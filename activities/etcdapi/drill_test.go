package etcdapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/sealstream"

	"kedge.dev/kedge/actions/errtype"
)

// sourceEtcd starts a one-member etcd in the test (etcd's embed package,
// plain http on loopback) and returns a client of it.
func sourceEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "source", filepath.Join(t.TempDir(), "data")
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	client, peer := "http://127.0.0.1:"+ports[0], "http://127.0.0.1:"+ports[1]
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = urls(client), urls(client)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls(peer), urls(peer)
	cfg.InitialCluster = "source=" + peer
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("the source etcd did not start within a minute")
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// storeSnapshot takes a snapshot of the source through etcd's
// maintenance API and stores it as etcd.snapshot does: sealed with the
// codec key under CLUSTER/etcd/TIMESTAMP-revN.snap.kseal, its manifest
// beside it. It returns the snapshot's key and manifest.
func storeSnapshot(t testing.TB, cl *clientv3.Client, store objstore.Store, keys sealstream.Keys, cluster string, created time.Time) (string, etcd.Manifest) {
	t.Helper()
	ctx := context.Background()
	st, err := cl.Status(ctx, cl.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	name := fmt.Sprintf("%s/etcd/%s-rev%d", cluster, created.UTC().Format(stampLayout), st.Header.Revision)
	pr, pw := io.Pipe()
	h := sha256.New()
	var size int64
	go func() {
		sw, err := sealstream.NewWriter(pw, keys)
		if err == nil {
			size, err = io.Copy(io.MultiWriter(sw, h), rc)
		}
		if err == nil {
			err = sw.Close()
		}
		_ = pw.CloseWithError(err)
	}()
	if err := store.Put(ctx, name+snapshotSuffix, pr); err != nil {
		t.Fatal(err)
	}
	m := etcd.Manifest{Cluster: cluster, Member: "source", Members: []string{"source"}, Revision: st.Header.Revision, Size: size,
		SHA256: hex.EncodeToString(h.Sum(nil)), KeyID: keys.ActiveKey(), Created: created.UTC().Format(time.RFC3339), Object: name + snapshotSuffix}
	putManifest(t, store, m)
	return name + snapshotSuffix, m
}

func putManifest(t testing.TB, store objstore.Store, m etcd.Manifest) {
	t.Helper()
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := store.Put(context.Background(), manifestKey(m.Object), strings.NewReader(string(data)+"\n")); err != nil {
		t.Fatal(err)
	}
}

// drillWorld is a source etcd with a canary Secret's key, two snapshots
// of it in a worker directory (the canary in both, a later key in the
// newer only) and a work directory of the drill's own.
type drillWorld struct {
	a                 *Activities
	store             *objstore.Dir
	in                etcd.RestoreDrillInput
	workDir           string
	older, newest     string
	newestManifest    etcd.Manifest
	keysInNewest      int64
	canary, laterOnly string
}

func newDrillWorld(t *testing.T) *drillWorld {
	t.Helper()
	cl := sourceEtcd(t)
	dest := filepath.Join(t.TempDir(), "backups")
	w := &drillWorld{a: &Activities{Keys: testKeys(t), Destinations: drillDests{"prod/local": {Kind: etcd.DestinationLocal, Path: dest}}},
		canary: "/registry/secrets/default/drill-canary", laterOnly: "/registry/configmaps/default/later", workDir: drillWorkDir(t)}
	var err error
	if w.store, err = objstore.NewDir(dest); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 {
		if _, err := cl.Put(ctx, fmt.Sprintf("/registry/pods/default/p%02d", i), strings.Repeat("x", 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Put(ctx, w.canary, "k8s\x00sealed-by-the-api-server"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	w.older, _ = storeSnapshot(t, cl, w.store, w.a.Keys, "prod", now.Add(-2*time.Hour))
	if _, err := cl.Put(ctx, w.laterOnly, "v"); err != nil {
		t.Fatal(err)
	}
	w.newest, w.newestManifest = storeSnapshot(t, cl, w.store, w.a.Keys, "prod", now.Add(-time.Hour))
	w.keysInNewest = 22
	w.in = etcd.RestoreDrillInput{Vault: target.Vault{Cluster: "prod"}, Destination: "local", ExpectKeys: []string{w.canary, w.laterOnly}}
	return w
}

// drillDests are the backup destinations a worker's inventories define,
// by CLUSTER/NAME.
type drillDests map[string]etcd.Destination

func (d drillDests) Destination(cluster, name string) (etcd.Destination, error) {
	dest, ok := d[cluster+"/"+name]
	if !ok {
		return etcd.Destination{}, fmt.Errorf("cluster %s defines no backup destination %s", cluster, name)
	}
	return dest, nil
}

// drillWorkDir has the test's drills make their directories in one of
// its own.
func drillWorkDir(t testing.TB) string {
	dir, old := t.TempDir(), drillTempDir
	drillTempDir = dir
	t.Cleanup(func() { drillTempDir = old })
	return dir
}

// assertCleanedUp fails unless the drill left nothing in its work
// directory.
func (w *drillWorld) assertCleanedUp(t *testing.T) {
	t.Helper()
	left, err := os.ReadDir(w.workDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the drill left %d entries in its work directory (%s...)", len(left), left[0].Name())
	}
}

// The newest snapshot of a real etcd, sealed in a worker directory, is
// restored into a throwaway etcd that answers at the manifest's
// revision with every key of the source and the ones expected; nothing
// is left behind.
func TestRestoreDrillOfARealSnapshot(t *testing.T) {
	w := newDrillWorld(t)
	res, err := w.a.RestoreDrill(context.Background(), w.in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drill: %+v", res)
	if res.Snapshot != w.newest {
		t.Errorf("restored %s, want the newest %s", res.Snapshot, w.newest)
	}
	if res.Revision != w.newestManifest.Revision || res.ManifestRevision != w.newestManifest.Revision {
		t.Errorf("revision %d (manifest %d), want %d", res.Revision, res.ManifestRevision, w.newestManifest.Revision)
	}
	if res.Keys != w.keysInNewest {
		t.Errorf("keys %d, want %d", res.Keys, w.keysInNewest)
	}
	if strings.Join(res.Found, ",") != w.canary+","+w.laterOnly || len(res.Missing) != 0 {
		t.Errorf("found %q, missing %q", res.Found, res.Missing)
	}
	if res.Size != w.newestManifest.Size || res.KeyID != w.a.Keys.ActiveKey() || res.AgeSeconds < 3500 || res.AgeSeconds > 3700 {
		t.Errorf("size %d keyId %s age %ds: want %d, %s, about 3600s", res.Size, res.KeyID, res.AgeSeconds, w.newestManifest.Size, w.a.Keys.ActiveKey())
	}
	w.assertCleanedUp(t)

	// The older one, named: it lacks the key written after it.
	w.in.Snapshot = filepath.Base(w.older)
	_, err = w.a.RestoreDrill(context.Background(), w.in)
	wantType(t, "a key written after the snapshot", err, errtype.EtcdDrillFailed, true, fmt.Sprintf("the etcd restored from %s lacks 1 of the 2 keys expected: %q", w.older, w.laterOnly))
	var ae *temporal.ApplicationError
	var details etcd.RestoreDrillResult
	if errors.As(err, &ae) && (ae.Details(&details) != nil || len(details.Missing) != 1 || details.Found[0] != w.canary) {
		t.Errorf("the failure's details: %+v", details)
	}
	w.assertCleanedUp(t)
}

// countRestores counts the restores the drill starts.
func countRestores(t *testing.T) *int {
	n := 0
	real := drillRestore
	drillRestore = func(ctx context.Context, dir, path string, expect []string) (restored, error) {
		n++
		return real(ctx, dir, path, expect)
	}
	t.Cleanup(func() { drillRestore = real })
	return &n
}

// A stored snapshot with one byte changed, or whose manifest does not
// match it, is refused before any etcd starts, not retried.
func TestRestoreDrillRefusesATamperedSnapshot(t *testing.T) {
	w := newDrillWorld(t)
	restores := countRestores(t)
	path := filepath.Join(w.store.Path(), filepath.FromSlash(w.newest))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(at int) {
		data := []byte(string(orig))
		data[at] ^= 0x01
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		at   int
		says string
	}{
		{"a byte of the first chunk", len(orig) / 3, "does not authenticate: chunk 0"},
		{"a byte of the last tag", len(orig) - 1, "does not authenticate"},
		{"the header's key id", len(sealstream.Magic) + 13 + 1, "sealed with a key not in the key file"},
	} {
		flip(c.at)
		_, err := w.a.RestoreDrill(context.Background(), w.in)
		wantType(t, c.name, err, errtype.EtcdSnapshotInvalid, true, "the snapshot "+w.newest+" is not restored: ")
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.says)
		}
		w.assertCleanedUp(t)
	}
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	m := w.newestManifest
	m.SHA256 = strings.Repeat("0", 64)
	putManifest(t, w.store, m)
	_, err = w.a.RestoreDrill(context.Background(), w.in)
	wantType(t, "another sha256 in the manifest", err, errtype.EtcdSnapshotInvalid, true, "its sha256 is not the one its manifest records")
	m = w.newestManifest
	m.Size--
	putManifest(t, w.store, m)
	_, err = w.a.RestoreDrill(context.Background(), w.in)
	wantType(t, "another size in the manifest", err, errtype.EtcdSnapshotInvalid, true, fmt.Sprintf("more than the %d bytes its manifest records", m.Size))
	if *restores != 0 {
		t.Errorf("%d restores started for a snapshot that failed its checks", *restores)
	}
	w.assertCleanedUp(t)
}

// An etcd snapshot is checked against its own trailing sha256 even when
// the seal and manifest agree with it (a snapshot sealed as etcd sent it
// wrong).
func TestRestoreDrillChecksEtcdsOwnSha256(t *testing.T) {
	w := newDrillWorld(t)
	restores := countRestores(t)
	data := snapshotBytes(4096) // a body and its right sha256
	data[10] ^= 0xff
	key := "prod/etcd/" + time.Now().UTC().Format(stampLayout) + "-rev7" + snapshotSuffix
	var sealed strings.Builder
	sw, _ := sealstream.NewWriter(&sealed, w.a.Keys)
	_, _ = sw.Write(data)
	_ = sw.Close()
	if err := w.store.Put(context.Background(), key, strings.NewReader(sealed.String())); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	putManifest(t, w.store, etcd.Manifest{Cluster: "prod", Revision: 7, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
		KeyID: w.a.Keys.ActiveKey(), Created: time.Now().UTC().Format(time.RFC3339), Object: key})
	_, err := w.a.RestoreDrill(context.Background(), w.in)
	wantType(t, "etcd's sha256", err, errtype.EtcdSnapshotInvalid, true, "etcd's trailing sha256 does not match the bytes before it")
	if *restores != 0 {
		t.Errorf("%d restores started", *restores)
	}
	w.assertCleanedUp(t)
}

// What the drill cannot use is refused before anything is read.
func TestRestoreDrillInputRefused(t *testing.T) {
	a := &Activities{Keys: testKeys(t), Destinations: drillDests{"prod/local": {Kind: etcd.DestinationLocal, Path: t.TempDir()},
		"prod/relative": {Kind: etcd.DestinationLocal, Path: "backups"}}}
	good := etcd.RestoreDrillInput{Vault: target.Vault{Cluster: "prod"}, Destination: "local"}
	for _, c := range []struct {
		name string
		edit func(*etcd.RestoreDrillInput)
		typ  string
		says string
	}{
		{"no cluster", func(in *etcd.RestoreDrillInput) { in.Vault.Cluster = "" }, errtype.InvalidInput, `cluster "" cannot name snapshots`},
		{"a cluster with a slash", func(in *etcd.RestoreDrillInput) { in.Vault.Cluster = "a/b" }, errtype.InvalidInput, `cluster "a/b"`},
		{"a path for a destination", func(in *etcd.RestoreDrillInput) { in.Destination = "/var/backups" }, errtype.CredentialRefused, "is not a destination's name"},
		{"a destination not defined", func(in *etcd.RestoreDrillInput) { in.Destination = "offsite" }, errtype.CredentialRefused, "defines no backup destination offsite"},
		{"a destination defined wrong", func(in *etcd.RestoreDrillInput) { in.Destination = "relative" }, errtype.CredentialRefused, "backups.relative"},
		{"another cluster's snapshot", func(in *etcd.RestoreDrillInput) { in.Snapshot = "dev/etcd/20260101T000000Z-rev5.snap.kseal" }, errtype.InvalidInput, "is not one of prod's snapshots"},
		{"not a snapshot's name", func(in *etcd.RestoreDrillInput) { in.Snapshot = "../x" }, errtype.InvalidInput, "is not one of prod's snapshots"},
		{"a key with a NUL", func(in *etcd.RestoreDrillInput) { in.ExpectKeys = []string{"/registry/a\x00b"} }, errtype.InvalidInput, "expectKeys[0]: \"/registry/a\\x00b\" holds U+0000"},
		{"a key with a line break", func(in *etcd.RestoreDrillInput) { in.ExpectKeys = []string{"ok", "/a\nb"} }, errtype.InvalidInput, "expectKeys[1]"},
		{"an empty key", func(in *etcd.RestoreDrillInput) { in.ExpectKeys = []string{""} }, errtype.InvalidInput, "expectKeys[0]: empty"},
		{"a key too long", func(in *etcd.RestoreDrillInput) { in.ExpectKeys = []string{"/" + strings.Repeat("a", 1024)} }, errtype.InvalidInput, "1025 bytes, at most 1024"},
		{"not UTF-8", func(in *etcd.RestoreDrillInput) { in.ExpectKeys = []string{"/\xff"} }, errtype.InvalidInput, "is not UTF-8"},
		{"too many keys", func(in *etcd.RestoreDrillInput) { in.ExpectKeys = make([]string, 101) }, errtype.InvalidInput, "101 keys: at most 100"},
	} {
		in := good
		c.edit(&in)
		_, err := a.RestoreDrill(context.Background(), in)
		wantType(t, c.name, err, c.typ, true, c.says)
	}
	_, err := (&Activities{Destinations: a.Destinations}).RestoreDrill(context.Background(), good)
	wantType(t, "no codec key", err, errtype.NoSealKey, true, "no codec key to open the snapshot with")
	_, err = a.RestoreDrill(context.Background(), good)
	wantType(t, "no snapshot", err, errtype.EtcdDrillFailed, true, "no snapshot of cluster prod in the destination")
	good.Snapshot = "20260101T000000Z-rev5.snap.kseal"
	_, err = a.RestoreDrill(context.Background(), good)
	wantType(t, "a snapshot not there", err, errtype.EtcdDrillFailed, true, "no snapshot prod/etcd/20260101T000000Z-rev5.snap.kseal in the destination")
}

// A snapshot still without its manifest (being written) is passed over
// for the newest that has one; its manifest must name it.
func TestRestoreDrillPicksTheNewestWithAManifest(t *testing.T) {
	store, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"prod/etcd/20260102T000000Z-rev9.snap.kseal", "prod/etcd/20260101T000000Z-rev5.snap.kseal", "prod/etcd/20260101T000000Z-rev5.json",
		"prod/etcd/20250101T000000Z-rev1.snap.kseal", "prod/etcd/20250101T000000Z-rev1.json", "prodx/etcd/20270101T000000Z-rev1.snap.kseal"} {
		if err := store.Put(ctx, k, strings.NewReader("{}")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := pickDrillSnapshot(ctx, store, "prod", "")
	if err != nil || s.name.key != "prod/etcd/20260101T000000Z-rev5.snap.kseal" {
		t.Fatalf("picked %q (%v)", s.name.key, err)
	}
	_, err = readManifest(ctx, store, "prod", s.name)
	wantType(t, "a manifest of another object", err, errtype.EtcdSnapshotInvalid, true, `names the object ""`)
	putManifest(t, store, etcd.Manifest{Cluster: "prod", Revision: 6, Size: 100, SHA256: strings.Repeat("a", 64), Object: s.name.key})
	_, err = readManifest(ctx, store, "prod", s.name)
	wantType(t, "a manifest of another revision", err, errtype.EtcdSnapshotInvalid, true, "records revision 6, its snapshot's name 5")
}

// BenchmarkRestoreDrill50MiB measures a drill of a snapshot of about 50
// MiB (400 random values of 128 KiB) from a worker directory: its fetch
// (read, open, check) and its restore (etcd's restore, start, answers).
func BenchmarkRestoreDrill50MiB(b *testing.B) {
	cl := sourceEtcd(b)
	ctx := context.Background()
	value := make([]byte, 128<<10)
	for i := range 400 {
		_, _ = rand.Read(value)
		if _, err := cl.Put(ctx, fmt.Sprintf("/registry/bench/v%03d", i), string(value)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := cl.Put(ctx, "/registry/secrets/default/drill-canary", "v"); err != nil {
		b.Fatal(err)
	}
	dest := b.TempDir()
	store, err := objstore.NewDir(dest)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "codec.key")
	if _, err := codec.Generate(path); err != nil {
		b.Fatal(err)
	}
	keys, err := codec.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	_, m := storeSnapshot(b, cl, store, keys, "bench", time.Now())
	drillWorkDir(b)
	a := &Activities{Keys: keys, Destinations: drillDests{"bench/local": {Kind: etcd.DestinationLocal, Path: dest}}}
	in := etcd.RestoreDrillInput{Vault: target.Vault{Cluster: "bench"}, Destination: "local", ExpectKeys: []string{"/registry/secrets/default/drill-canary"}}
	var fetch, restore int64
	for b.Loop() {
		res, err := a.RestoreDrill(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		fetch, restore = fetch+res.FetchMillis, restore+res.RestoreMillis
	}
	b.ReportMetric(float64(m.Size)/(1<<20), "MiB")
	b.ReportMetric(float64(fetch)/float64(b.N), "fetch-ms/op")
	b.ReportMetric(float64(restore)/float64(b.N), "restore-ms/op")
}

// The fetch streams: a 32 MiB snapshot is read, opened, checked and
// written with a few MiB allocated (one sealed chunk and its plaintext,
// copy buffers), never the snapshot whole.
func TestRestoreDrillFetchIsStreamed(t *testing.T) {
	keys := testKeys(t)
	store, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := snapshotBytes(32 << 20)
	key := "prod/etcd/20260101T000000Z-rev7" + snapshotSuffix
	pr, pw := io.Pipe()
	go func() {
		sw, _ := sealstream.NewWriter(pw, keys)
		_, err := sw.Write(data)
		if err == nil {
			err = sw.Close()
		}
		_ = pw.CloseWithError(err)
	}()
	if err := store.Put(context.Background(), key, pr); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	m := etcd.Manifest{Cluster: "prod", Revision: 7, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), KeyID: keys.ActiveKey(), Object: key}
	data = nil
	snap, _ := parseSnapshotKey("prod/etcd/", key)
	prog := startDrillProgress(context.Background(), key, 0)
	defer prog.stop()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err = (&Activities{Keys: keys}).fetchSnapshot(context.Background(), store, storedSnapshot{name: snap}, m, filepath.Join(t.TempDir(), "snapshot.db"), prog)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("the fetch of a %d MiB snapshot allocated %d MiB", m.Size>>20, alloc>>20)
	} else {
		t.Logf("the fetch of a %d MiB snapshot allocated %.1f MiB, read %d bytes", m.Size>>20, float64(alloc)/(1<<20), prog.done.Load())
	}
}

// A drill heartbeats its phase and the sealed bytes read, on a ticker,
// so etcd's restore and start heartbeat too; the last says it is done.
func TestRestoreDrillHeartbeats(t *testing.T) {
	w := newDrillWorld(t)
	every, record := drillBeatEvery, recordDrillBeat
	var mu sync.Mutex
	var beats []DrillProgress
	drillBeatEvery = time.Millisecond
	recordDrillBeat = func(_ context.Context, p DrillProgress) {
		mu.Lock()
		beats = append(beats, p)
		mu.Unlock()
	}
	t.Cleanup(func() { drillBeatEvery, recordDrillBeat = every, record })
	if _, err := w.a.RestoreDrill(context.Background(), w.in); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	info, err := os.Stat(filepath.Join(w.store.Path(), filepath.FromSlash(w.newest)))
	if err != nil {
		t.Fatal(err)
	}
	stored := info.Size()
	t.Logf("%d heartbeats, the first %+v, the last %+v", len(beats), beats[0], beats[len(beats)-1])
	if first := beats[0]; first != (DrillProgress{Snapshot: w.newest, Phase: phaseFetch, Total: stored}) {
		t.Errorf("the first heartbeat %+v, want the fetch at 0 of %d", first, stored)
	}
	if !slices.Contains(beats, DrillProgress{Snapshot: w.newest, Phase: phaseRestore, Done: stored, Total: stored}) {
		t.Errorf("no heartbeat of the restore with all %d bytes read", stored)
	}
	if last := beats[len(beats)-1]; last != (DrillProgress{Snapshot: w.newest, Phase: phaseDone, Done: stored, Total: stored}) {
		t.Errorf("the last heartbeat %+v, want done at %d", last, stored)
	}
}
