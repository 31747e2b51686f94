package etcdapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/sealstream"

	"kedge.dev/kedge/actions/errtype"
)

// testKeys is a codec key file of its own.
func testKeys(t *testing.T) *codec.Codec {
	t.Helper()
	path := filepath.Join(t.TempDir(), "codec.key")
	if _, err := codec.Generate(path); err != nil {
		t.Fatal(err)
	}
	c, err := codec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// boltMagic is bbolt's magic number as a database file holds it (little
// endian, in both meta pages): an etcd snapshot starts with it.
var boltMagic = []byte{0xed, 0xda, 0x0c, 0xed}

func wantType(t *testing.T, what string, err error, typ string, nonRetryable bool, says string) {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, typ) || ae.NonRetryable() != nonRetryable || !strings.Contains(err.Error(), says) {
		t.Errorf("%s: got %v, want %s (non-retryable %v) saying %q", what, err, typ, nonRetryable, says)
	}
}

// A snapshot of a real etcd holding a few MiB, taken over TLS with a
// client certificate from etcd's CA, lands in the directory sealed: the
// stored object holds neither bbolt's magic nor a key name, opens with
// the codec key to exactly the bytes etcd sent (its sha256, size and
// etcd's own trailing sha256), and its manifest says what it is.
func TestSnapshotOfARealEtcd(t *testing.T) {
	e := startEtcd(t)
	value := bytes.Repeat([]byte("kedge-snapshot-value/"), 400) // 8 KiB
	for i := range 400 {
		e.put(t, fmt.Sprintf("/registry/secrets/kedge-test/secret-%03d", i), value)
	}
	keys := testKeys(t)
	dir := t.TempDir()
	a := &Activities{Vault: e.issuer, Keys: keys, Timeout: 5 * time.Second, Destinations: localDest(dir)}
	in := etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{e.endpoint}, CACert: e.caPEM, Issuer: "etcd",
		Destination: "local"}
	start := time.Now()
	res, err := a.Snapshot(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("snapshot of %.1f MiB (revision %d) taken, sealed and stored in %s (%.0f MiB/s)", float64(res.Size)/(1<<20), res.Revision, took, float64(res.Size)/(1<<20)/took.Seconds())
	if res.Member != "m1" || res.Revision < 401 || res.Size < 3<<20 || res.KeyID != keys.ActiveKey() || !slices.Equal(res.Members, []string{"m1"}) ||
		!strings.HasPrefix(res.Key, "mercury/etcd/") || !strings.HasSuffix(res.Key, fmt.Sprintf("-rev%d.snap.kseal", res.Revision)) ||
		res.Manifest != strings.TrimSuffix(res.Key, ".snap.kseal")+".json" || res.Stored <= res.Size {
		t.Errorf("result: %+v", res)
	}

	stored, err := os.ReadFile(filepath.Join(dir, res.Key))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(stored)) != res.Stored {
		t.Errorf("stored %d bytes, the result says %d", len(stored), res.Stored)
	}
	r, err := sealstream.NewReader(bytes.NewReader(stored), keys)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(snap)
	if hex.EncodeToString(sum[:]) != res.SHA256 || int64(len(snap)) != res.Size {
		t.Errorf("opened: %d bytes, sha256 %x; the result says %d bytes, %s", len(snap), sum, res.Size, res.SHA256)
	}
	body := snap[:len(snap)-sha256.Size]
	if inner := sha256.Sum256(body); !bytes.Equal(inner[:], snap[len(body):]) {
		t.Error("the opened snapshot does not end with etcd's sha256 of the bytes before it")
	}
	if !bytes.Contains(snap, boltMagic) || !bytes.Contains(snap, []byte("/registry/secrets/kedge-test/secret-399")) {
		t.Error("the opened snapshot is not etcd's database with the keys written")
	}
	// Nothing of it in the clear: its first meta page (bbolt's magic
	// among it; the 4-byte magic alone turns up by chance in megabytes of
	// ciphertext, once in a thousand runs), the keys, the values.
	for _, plain := range [][]byte{snap[:64], []byte("/registry/secrets/kedge-test/"), []byte("kedge-snapshot-value/")} {
		if bytes.Contains(stored, plain) {
			t.Errorf("the stored object holds %q in the clear", plain)
		}
	}

	mf, err := os.ReadFile(filepath.Join(dir, res.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	var m etcd.Manifest
	if err := json.Unmarshal(mf, &m); err != nil {
		t.Fatal(err)
	}
	if m.Cluster != "mercury" || m.Member != "m1" || m.Revision != res.Revision || m.Size != res.Size || m.SHA256 != res.SHA256 ||
		m.KeyID != res.KeyID || m.Object != res.Key || m.Created != res.Created || m.StorageVersion == "" {
		t.Errorf("manifest: %s", mf)
	}
	if fi, _ := os.Stat(filepath.Join(dir, res.Key)); fi.Mode().Perm() != 0o600 {
		t.Errorf("the stored object's mode is %04o", fi.Mode().Perm())
	}
}

// Retention after a real snapshot: the newest keepLast and those younger
// than keepFor stay, the rest go with their manifests, oldest first; the
// one just written always stays; other clusters' objects and other names
// are never touched.
func TestSnapshotRetention(t *testing.T) {
	e := startEtcd(t)
	e.put(t, "/registry/a", []byte("b"))
	dir := t.TempDir()
	store, err := objstore.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	put := func(key string) {
		if err := store.Put(context.Background(), key, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	old := func(ago time.Duration, rev int) string {
		name := fmt.Sprintf("mercury/etcd/%s-rev%d", now.Add(-ago).Format(stampLayout), rev)
		put(name + ".snap.kseal")
		put(name + ".json")
		return name + ".snap.kseal"
	}
	hour := old(time.Hour, 40)
	twoHours := old(2*time.Hour, 30)
	threeDays := old(72*time.Hour, 20)
	fourDays := old(96*time.Hour, 10)
	put("venus/etcd/" + now.Add(-100*time.Hour).Format(stampLayout) + "-rev1.snap.kseal")
	put("mercury/etcd/notes.txt")

	a := &Activities{Vault: e.issuer, Keys: testKeys(t), Destinations: localDest(dir)}
	in := etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{e.endpoint}, CACert: e.caPEM, Issuer: "etcd",
		Destination: "local", KeepLast: 2, KeepFor: "48h"}
	res, err := a.Snapshot(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Deleted, []string{fourDays, threeDays}) {
		t.Errorf("keepLast 2, keepFor 48h deleted %v, want the two older than 48h", res.Deleted)
	}
	in.KeepLast, in.KeepFor = 1, ""
	res2, err := a.Snapshot(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{twoHours, hour}
	if res2.Key != res.Key { // two snapshots in the same second have one key
		want = append(want, res.Key)
	}
	if !slices.Equal(res2.Deleted, want) {
		t.Errorf("keepLast 1 deleted %v, want %v", res2.Deleted, want)
	}
	objs, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, o := range objs {
		left = append(left, o.Key)
	}
	wantLeft := []string{res2.Manifest, res2.Key, "mercury/etcd/notes.txt", "venus/etcd/" + now.Add(-100*time.Hour).Format(stampLayout) + "-rev1.snap.kseal"}
	slices.Sort(wantLeft)
	if !slices.Equal(left, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
}

// The member asked for must be there, started, voting and healthy; with
// none asked for, a healthy follower comes first. Refusals name it.
func TestSnapshotSourceIsAHealthyVotingMember(t *testing.T) {
	fakes, ca := threeMembers(t, "12")
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	cl, err := a.client(context.Background(), etcd.RemoveMemberInput{CACert: ca, Issuer: "etcd"})
	if err != nil {
		t.Fatal(err)
	}
	endpoints := []string{fakes[0].srv.URL}
	src, err := pickSource(context.Background(), cl, endpoints, "")
	if err != nil || src.name != "c1" || src.endpoint != fakes[0].srv.URL || !slices.Equal(src.members, []string{"c1", "c2", "c3"}) {
		t.Errorf("any member: %+v, %v", src, err)
	}
	if src, err := pickSource(context.Background(), cl, endpoints, "c2"); err != nil || src.name != "c2" || src.endpoint != fakes[1].srv.URL {
		t.Errorf("the leader asked for: %+v, %v", src, err)
	}
	fakes[0].srv.Close()
	if src, err := pickSource(context.Background(), cl, []string{fakes[2].srv.URL}, ""); err != nil || src.name != "c3" {
		t.Errorf("c1 down: %+v, %v", src, err)
	}
	_, err = pickSource(context.Background(), cl, []string{fakes[2].srv.URL}, "c1")
	wantType(t, "c1 down and asked for", err, errtype.EtcdUnhealthy, true, "refusing a snapshot from c1: it does not answer")
	_, err = pickSource(context.Background(), cl, []string{fakes[2].srv.URL}, "c9")
	wantType(t, "no such member", err, errtype.InvalidInput, true, "etcd has no member named c9 (members: c1, c2, c3)")
}

// Why a member cannot give a snapshot.
func TestSourceProblem(t *testing.T) {
	ok := answer{endpoint: "https://c1:2379", status: status{Leader: "12"}}
	started := member{ID: "11", Name: "c1", ClientURLs: []string{"https://c1:2379"}}
	for _, c := range []struct {
		name   string
		m      snapMember
		ans    answer
		alarms []alarm
		want   string
	}{
		{"healthy", snapMember{member: started}, ok, nil, ""},
		{"not started", snapMember{member: member{ID: "11", PeerURLs: []string{"https://c1:2380"}}}, ok, nil, "has not started"},
		{"a learner", snapMember{member: started, IsLearner: true}, ok, nil, "is a learner, not a voting member"},
		{"not answering", snapMember{member: started}, answer{err: errors.New("connection refused")}, nil, "does not answer: connection refused"},
		{"no leader", snapMember{member: started}, answer{endpoint: "https://c1:2379", status: status{Leader: "0"}}, nil, "knows no leader"},
		{"an error", snapMember{member: started}, answer{endpoint: "x", status: status{Leader: "12", Errors: []string{"NOSPACE"}}}, nil, "reports NOSPACE"},
		{"its alarm", snapMember{member: started}, ok, []alarm{{MemberID: "11", Alarm: "CORRUPT"}}, "has the alarm CORRUPT raised"},
		{"another's alarm", snapMember{member: started}, ok, []alarm{{MemberID: "12", Alarm: "NOSPACE"}}, ""},
	} {
		if got := sourceProblem(c.m, c.ans, c.alarms); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// snapshotServer is etcd's Maintenance service with its Snapshot alone:
// send answers each call.
type snapshotServer struct {
	etcdserverpb.UnimplementedMaintenanceServer
	send func(etcdserverpb.Maintenance_SnapshotServer) error
}

func (s *snapshotServer) Snapshot(_ *etcdserverpb.SnapshotRequest, srv etcdserverpb.Maintenance_SnapshotServer) error {
	return s.send(srv)
}

// snapshotMember is one member, c1, that serves as etcd does on its
// client port: gRPC (its Snapshot answered by send) beside the JSON
// gateway (the rest as fakeMember does), over TLS. It returns its URL and
// CA.
func snapshotMember(t *testing.T, send func(etcdserverpb.Maintenance_SnapshotServer) error) (string, string) {
	t.Helper()
	g := grpc.NewServer()
	etcdserverpb.RegisterMaintenanceServer(g, &snapshotServer{send: send})
	f := &fakeMember{id: "11", leader: "11"}
	f.members = func() []member { return []member{{ID: "11", Name: "c1", ClientURLs: []string{f.srv.URL}}} }
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			g.ServeHTTP(w, r)
			return
		}
		f.ServeHTTP(w, r)
	}))
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	t.Cleanup(g.Stop)
	return f.srv.URL, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}))
}

// messagesOf cuts data as etcd does: messages of the database's bytes,
// each with the database's bytes left (not etcd's sha256) and the
// storage version, then the sha256 in a message of its own.
func messagesOf(data []byte, msg int) []*etcdserverpb.SnapshotResponse {
	db := len(data) - sha256.Size
	var out []*etcdserverpb.SnapshotResponse
	for sent := 0; sent < len(data); {
		n := min(msg, len(data)-sent)
		if sent < db {
			n = min(n, db-sent)
		}
		sent += n
		out = append(out, &etcdserverpb.SnapshotResponse{Blob: data[sent-n : sent], RemainingBytes: uint64(max(db-sent, 0)), Version: "3.6.0"})
	}
	return out
}

// sendAll sends messages, in order.
func sendAll(messages []*etcdserverpb.SnapshotResponse) func(etcdserverpb.Maintenance_SnapshotServer) error {
	return func(srv etcdserverpb.Maintenance_SnapshotServer) error {
		for _, m := range messages {
			if err := srv.Send(m); err != nil {
				return err
			}
		}
		return nil
	}
}

// snapshotBytes is a database of n random bytes and etcd's sha256 of it.
func snapshotBytes(n int) []byte {
	db := make([]byte, n)
	_, _ = rand.Read(db)
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

// A snapshot that fails etcd's own checks (its trailing sha256, its
// announced size) or breaks off is refused and nothing is stored.
func TestCorruptSnapshotIsNotStored(t *testing.T) {
	good := snapshotBytes(100 << 10)
	badSum := bytes.Clone(good)
	badSum[len(badSum)-1] ^= 1
	badBody := bytes.Clone(good)
	badBody[5000] ^= 1
	msgs := messagesOf(good, 32<<10)
	for _, c := range []struct {
		name string
		send func(etcdserverpb.Maintenance_SnapshotServer) error
		typ  string
		says string
	}{
		{"good", sendAll(msgs), "", ""},
		{"its sha256 changed", sendAll(messagesOf(badSum, 32<<10)), errtype.EtcdSnapshotCorrupt, "its trailing sha256 does not match"},
		{"a byte changed", sendAll(messagesOf(badBody, 32<<10)), errtype.EtcdSnapshotCorrupt, "its trailing sha256 does not match"},
		{"a message lost", sendAll(append(msgs[:1:1], msgs[2:]...)), errtype.EtcdSnapshotCorrupt,
			fmt.Sprintf("it announced %d bytes and sent %d", len(good), len(good)-32<<10)},
		{"an error mid-stream", func(srv etcdserverpb.Maintenance_SnapshotServer) error {
			if err := srv.Send(msgs[0]); err != nil {
				return err
			}
			return grpcstatus.Error(codes.Unavailable, "etcdserver: leader changed")
		}, errtype.EtcdUnavailable, "failed after 32768 bytes: etcdserver: leader changed"},
		{"nothing", func(etcdserverpb.Maintenance_SnapshotServer) error { return nil }, errtype.EtcdSnapshotCorrupt, "it sent no data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			endpoint, ca := snapshotMember(t, c.send)
			dir := t.TempDir()
			a := &Activities{Vault: clientPair(t), Keys: testKeys(t), Timeout: 2 * time.Second, Destinations: localDest(dir)}
			res, err := a.Snapshot(context.Background(), etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{endpoint}, CACert: ca,
				Issuer: "etcd", Destination: "local"})
			stored, _ := filepath.Glob(filepath.Join(dir, "mercury", "etcd", "*"))
			if c.typ == "" {
				if err != nil || res.Size != int64(len(good)) || len(stored) != 2 {
					t.Fatalf("good: %+v, %v, stored %v", res, err, stored)
				}
				var m etcd.Manifest
				if mf, err := os.ReadFile(filepath.Join(dir, res.Manifest)); err != nil || json.Unmarshal(mf, &m) != nil || m.StorageVersion != "3.6.0" {
					t.Errorf("good: manifest %+v (%v), want etcd's storage version 3.6.0", m, err)
				}
				return
			}
			wantType(t, c.name, err, c.typ, false, c.says)
			if len(stored) != 0 {
				t.Errorf("stored %v", stored)
			}
		})
	}
}

// etcd's trailing sha256 is found however the stream is cut.
func TestTrailerFindsTheLastBytesHoweverCut(t *testing.T) {
	data := snapshotBytes(1000)
	for _, step := range []int{1, 7, 31, 32, 33, 500, 1032} {
		tr := &trailer{h: sha256.New()}
		for i := 0; i < len(data); i += step {
			tr.Write(data[i:min(i+step, len(data))])
		}
		if !tr.matches() {
			t.Errorf("in pieces of %d: no match", step)
		}
	}
	tr := &trailer{h: sha256.New()}
	tr.Write(data[:len(data)-1])
	if tr.matches() {
		t.Error("one byte short: a match")
	}
}

// dests are a worker's backup destinations, by "CLUSTER/NAME": what its
// inventories define.
type dests map[string]etcd.Destination

func (d dests) Destination(cluster, name string) (etcd.Destination, error) {
	if dest, ok := d[cluster+"/"+name]; ok {
		return dest, nil
	}
	return etcd.Destination{}, fmt.Errorf("cluster %s: the inventory defines no backup destination %q", cluster, name)
}

// localDest is a worker whose inventory of mercury defines the
// destination local: the directory dir.
func localDest(dir string) dests {
	return dests{"mercury/local": {Kind: etcd.DestinationLocal, Path: dir}}
}

// Nothing of the input reaches a path or a URL unchecked: the run names
// a destination of the worker's inventory, and anything else is refused
// before a directory is made or a server asked; the worker needs its key.
func TestSnapshotInputRefused(t *testing.T) {
	dir := t.TempDir()
	operators := filepath.Join(dir, "backups")
	worker := dests{"mercury/local": {Kind: etcd.DestinationLocal, Path: operators},
		"mercury/broken": {Kind: etcd.DestinationLocal, Path: "backups"}}
	base := etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{"https://127.0.0.1:2379"}, CACert: "x", Issuer: "etcd", Destination: "local"}
	with := func(f func(*etcd.SnapshotInput)) etcd.SnapshotInput { in := base; f(&in); return in }
	named := func(name string) etcd.SnapshotInput {
		return with(func(in *etcd.SnapshotInput) { in.Destination = name })
	}
	for _, c := range []struct {
		name string
		in   etcd.SnapshotInput
		typ  string
		says string
	}{
		{"no cluster", with(func(in *etcd.SnapshotInput) { in.Vault.Cluster = "" }), errtype.InvalidInput, `cluster "" cannot name snapshots`},
		{"a cluster with a slash", with(func(in *etcd.SnapshotInput) { in.Vault.Cluster = "a/b" }), errtype.InvalidInput, `cluster "a/b" cannot name snapshots`},
		{"a cluster ..", with(func(in *etcd.SnapshotInput) { in.Vault.Cluster = ".." }), errtype.InvalidInput, `cluster ".." cannot name snapshots`},
		{"an http endpoint", with(func(in *etcd.SnapshotInput) { in.Endpoints = []string{"http://127.0.0.1:2379"} }), errtype.InvalidInput, "is not https://HOST:PORT"},
		{"keepLast negative", with(func(in *etcd.SnapshotInput) { in.KeepLast = -1 }), errtype.InvalidInput, "keepLast must not be negative"},
		{"keepFor not a duration", with(func(in *etcd.SnapshotInput) { in.KeepFor = "7d" }), errtype.InvalidInput, `keepFor "7d" is not a positive duration`},
		{"a path", named(filepath.Join(dir, "elsewhere")), errtype.CredentialRefused, "is not a destination's name: a run names one of the destinations the worker's inventory of cluster mercury defines under backups:, never a path or an endpoint"},
		{"an endpoint", named("https://s3.example:9000"), errtype.CredentialRefused, "never a path or an endpoint"},
		{"a name and a path", named("local/../../etc"), errtype.CredentialRefused, "never a path or an endpoint"},
		{"no name", named(""), errtype.CredentialRefused, `destination "" is not a destination's name`},
		{"a name not defined", named("offsite"), errtype.CredentialRefused, `destination offsite: cluster mercury: the inventory defines no backup destination "offsite"`},
		{"another cluster's name", with(func(in *etcd.SnapshotInput) { in.Vault.Cluster = "venus" }), errtype.CredentialRefused, `cluster venus: the inventory defines no backup destination "local"`},
		{"a definition that fails its checks", named("broken"), errtype.CredentialRefused, `destination broken (the worker's inventory of cluster mercury, backups.broken): path "backups" is not an absolute, clean path`},
	} {
		_, err := (&Activities{Keys: testKeys(t), Destinations: worker}).Snapshot(context.Background(), c.in)
		wantType(t, c.name, err, c.typ, true, c.says)
	}
	_, err := (&Activities{Keys: testKeys(t)}).Snapshot(context.Background(), base)
	wantType(t, "a worker with no destinations", err, errtype.CredentialRefused, true, "this worker knows no backup destinations")
	_, err = (&Activities{Destinations: worker}).Snapshot(context.Background(), base)
	wantType(t, "no codec key", err, errtype.NoSealKey, true, "the worker has no codec key")
	if _, err := os.Stat(operators); err == nil {
		t.Errorf("a refused snapshot made %s", operators)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused snapshot wrote %v", entries)
	}
}

// The S3 credentials come from a file only its owner may read; a file
// others may read is refused before any connection, without its content.
func TestS3CredentialsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# Kedge's backups\n[default]\naws_access_key_id = AKIDKEDGE\naws_secret_access_key = s3cr3t-value\n[other]\naws_access_key_id = WRONG\n", 0o600)
	if access, secret, err := readS3Credentials(good); err != nil || access != "AKIDKEDGE" || secret != "s3cr3t-value" {
		t.Errorf("good: %q %q %v", access, secret, err)
	}
	if _, _, err := readS3Credentials(write("half", "aws_access_key_id = A\n", 0o600)); err == nil || !strings.Contains(err.Error(), "has no aws_access_key_id and aws_secret_access_key") {
		t.Errorf("no secret: %v", err)
	}
	open := write("open", "aws_access_key_id = A\naws_secret_access_key = s3cr3t-value\n", 0o644)
	in := etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{"https://127.0.0.1:2379"}, CACert: "x", Issuer: "etcd", Destination: "offsite"}
	offsite := dests{"mercury/offsite": {Kind: etcd.DestinationS3, Endpoint: "https://127.0.0.1:1", Bucket: "kedge-backups", CredentialsFile: open}}
	_, err := (&Activities{Keys: testKeys(t), Destinations: offsite}).Snapshot(context.Background(), in)
	wantType(t, "credentials readable by others", err, errtype.InvalidInput, true, "is open to other users (mode 0644)")
	if err != nil && strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("the error holds the secret: %v", err)
	}
}

// Inside an activity the snapshot heartbeats its bytes done of the
// total etcd announced.
func TestSnapshotHeartbeatsItsProgress(t *testing.T) {
	data := snapshotBytes(300 << 10)
	endpoint, ca := snapshotMember(t, sendAll(messagesOf(data, 32<<10)))
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	var mu sync.Mutex
	var beats []SnapshotProgress
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p SnapshotProgress
		if d.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})
	a := &Activities{Vault: clientPair(t), Keys: testKeys(t), Timeout: 2 * time.Second, Destinations: localDest(t.TempDir())}
	env.RegisterActivityWithOptions(a.Snapshot, activity.RegisterOptions{Name: etcd.SnapshotAction})
	if _, err := env.ExecuteActivity(etcd.SnapshotAction, etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{endpoint}, CACert: ca,
		Issuer: "etcd", Destination: "local"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	total := int64(len(data))
	// The SDK throttles what reaches the server: the first heartbeat
	// always does.
	if len(beats) == 0 || beats[0] != (SnapshotProgress{Member: "c1", Done: 32 << 10, Total: total}) {
		t.Errorf("heartbeats %+v, want the first at the first message's bytes of %d", beats, total)
	}
}

// A member that stops sending mid-snapshot is given up (retried), not
// waited on until the activity's timeout, and nothing is stored.
func TestStalledSnapshotIsGivenUp(t *testing.T) {
	defer func(d time.Duration) { snapshotStall = d }(snapshotStall)
	snapshotStall = 300 * time.Millisecond
	data := snapshotBytes(100 << 10)
	release := make(chan struct{})
	defer close(release)
	endpoint, ca := snapshotMember(t, func(srv etcdserverpb.Maintenance_SnapshotServer) error {
		if err := srv.Send(messagesOf(data, 32<<10)[0]); err != nil {
			return err
		}
		select {
		case <-release:
		case <-srv.Context().Done():
		}
		return nil
	})
	dir := t.TempDir()
	a := &Activities{Vault: clientPair(t), Keys: testKeys(t), Timeout: 2 * time.Second, Destinations: localDest(dir)}
	_, err := a.Snapshot(context.Background(), etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{endpoint}, CACert: ca,
		Issuer: "etcd", Destination: "local"})
	wantType(t, "stalled", err, errtype.EtcdUnavailable, false, "snapshot from c1: nothing came for 300ms after 32768 bytes")
	if stored, _ := filepath.Glob(filepath.Join(dir, "mercury", "etcd", "*")); len(stored) != 0 {
		t.Errorf("stored %v", stored)
	}
}

// Snapshots taken within one second, at one revision, are kept apart:
// each run stores its own, and retention counts them as two.
func TestSnapshotsInOneSecondKeepTheirOwnNames(t *testing.T) {
	data := snapshotBytes(64 << 10)
	endpoint, ca := snapshotMember(t, sendAll(messagesOf(data, 32<<10)))
	dir := t.TempDir()
	a := &Activities{Vault: clientPair(t), Keys: testKeys(t), Timeout: 2 * time.Second, Destinations: localDest(dir)}
	in := etcd.SnapshotInput{Vault: target.Vault{Cluster: "mercury"}, Endpoints: []string{endpoint}, CACert: ca, Issuer: "etcd", Destination: "local", KeepLast: 2}
	var keys []string
	for range 3 {
		res, err := a.Snapshot(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, res.Key)
	}
	stored, _ := filepath.Glob(filepath.Join(dir, "mercury", "etcd", "*.snap.kseal"))
	if keys[0] == keys[1] || keys[1] == keys[2] || len(stored) != 2 {
		t.Errorf("three snapshots in a row named %v; stored %v, want the newest two", keys, stored)
	}
	if _, err := os.Stat(filepath.Join(dir, keys[0])); err == nil {
		t.Errorf("the oldest, %s, was kept", keys[0])
	}
}

// Names to the millisecond, and the names to the second written before,
// are read back; anything else under the prefix is not a snapshot.
func TestParseSnapshotKey(t *testing.T) {
	for key, want := range map[string]string{
		"mercury/etcd/20261127T034019.123Z-rev412.snap.kseal": "2026-11-27T03:40:19.123Z",
		"mercury/etcd/20261127T034019Z-rev412.snap.kseal":     "2026-11-27T03:40:19Z",
	} {
		s, ok := parseSnapshotKey("mercury/etcd/", key)
		if !ok || s.created.Format(time.RFC3339Nano) != want || s.revision != 412 {
			t.Errorf("%s: %+v %v", key, s, ok)
		}
	}
	for _, key := range []string{"mercury/etcd/x-rev4.snap.kseal", "mercury/etcd/20261127T034019Z-revx.snap.kseal",
		"mercury/etcd/20261127T034019Z-rev4.json", "mercury/etcd/sub/20261127T034019Z-rev4.snap.kseal", "venus/etcd/20261127T034019Z-rev4.snap.kseal"} {
		if s, ok := parseSnapshotKey("mercury/etcd/", key); ok {
			t.Errorf("%s read as a snapshot: %+v", key, s)
		}
	}
}
