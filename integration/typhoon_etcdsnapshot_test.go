package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/integration/s3lab"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/sealstream"
	"kedge.dev/kedge/workflows"
)

// boltMagic is bbolt's magic number as an etcd database file holds it
// (little endian), in every meta page.
var boltMagic = []byte{0xed, 0xda, 0x0c, 0xed}

// TestEtcdSnapshotOnTyphoonCluster runs etcd-snapshot on the Typhoon
// world (three real etcd members, etcd's CA adopted into Vault) into the
// two destinations its inventory defines: a directory on the worker and
// a bucket of a real S3-compatible server. Each stored snapshot is
// ciphertext (no bbolt magic, no key name), opens with the codec key to
// the bytes whose sha256 its manifest gives, and holds the Secret
// written before it. Run three times with keepLast 2, the oldest goes
// with its manifest. With tyc2's etcd stopped, a snapshot from tyc2 is
// refused before anything is stored, and so is any snapshot with
// requireHealthy; one without a member named comes from a healthy one.
func TestEtcdSnapshotOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	adoptTyphoon(t)
	ctx := t.Context()
	cs := typhoonBuilt.client

	canary := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kedge-snapshot-canary", Namespace: "default"},
		StringData: map[string]string{"value": "written before the snapshot"}}
	if err := cs.CoreV1().Secrets("default").Delete(ctx, canary.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete an earlier canary: %v", err)
	}
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, canary, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	canaryKey := "/registry/secrets/default/kedge-snapshot-canary"

	srv := s3lab.StartT(t, s3lab.Options{})
	dir := t.TempDir()
	backups := filepath.Join(dir, "backups")
	creds := filepath.Join(dir, "s3.credentials")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(typhoonBuilt.inventory)
	if err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(dir, "inventory.yaml")
	body := string(base) + fmt.Sprintf("backups:\n  local:\n    kind: local\n    path: %s\n"+
		"  offsite:\n    kind: s3\n    endpoint: http://%s\n    insecure: true\n    bucket: %s\n    region: %s\n    credentialsFile: %s\n",
		backups, srv.Endpoint, srv.Bucket, srv.Region, creds)
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// Later tests of the world are served its own inventory again.
	t.Cleanup(func() { workerServes(typhoonBuilt.inventory) })

	snapshot := func(t *testing.T, dest string, args ...string) (workflows.Progress, int, string, time.Duration) {
		t.Helper()
		began := time.Now()
		p, code, errOut := runWaitInv(t, "etcd-snapshot", inv, append([]string{"--set", "destination=" + dest}, args...)...)
		return p, code, errOut, time.Since(began)
	}
	stores := map[string]func(t *testing.T) objstore.Store{
		"local": func(t *testing.T) objstore.Store {
			st, err := objstore.NewDir(backups)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"offsite": func(t *testing.T) objstore.Store { return s3Store(t, srv, srv.SecretKey) },
	}
	for _, dest := range []string{"local", "offsite"} {
		t.Run(dest, func(t *testing.T) {
			store := stores[dest](t)
			var kept [][]string // the snapshots after each run
			for i := range 3 {
				p, code, errOut, took := snapshot(t, dest, "--set", "keepLast=2", "--set", "keepFor=0s")
				if code != 0 {
					t.Fatalf("etcd-snapshot into %s, run %d: exit %d: %s\n%+v", dest, i+1, code, errOut, p)
				}
				snaps := storedSnapshots(t, store)
				t.Logf("etcd-snapshot into %s, run %d: %s (the run, end to end); stored %v", dest, i+1, took.Round(time.Millisecond), snaps)
				kept = append(kept, snaps)
			}
			if len(kept[0]) != 1 || len(kept[1]) != 2 || len(kept[2]) != 2 {
				t.Fatalf("snapshots after each run: %v, want 1, 2, then 2 (keepLast 2)", kept)
			}
			first := kept[0][0]
			if slices.Contains(kept[2], first) || !slices.Contains(kept[2], kept[1][1]) {
				t.Errorf("after the third run: %v; want the first (%s) deleted and the second kept", kept[2], first)
			}
			objs, err := store.List(ctx, typhoonCluster+"/etcd/")
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 4 {
				t.Errorf("objects left: %v, want the two snapshots and their manifests", objs)
			}
			checkSealedSnapshot(t, store, kept[2][1], canaryKey)
		})
	}

	// Every 6 hours, as an operator schedules it: triggered now, it
	// stores one more snapshot.
	t.Run("scheduled", func(t *testing.T) {
		store := stores["local"](t)
		before := storedSnapshots(t, store)
		id := "etcd-snapshot/" + typhoonCluster
		out, errOut, code := kedge(t, "schedule", "etcd-snapshot", "--inventory", inv, "--set", "destination=local",
			"--set", "keepLast=3", "--set", "keepFor=0s", "--every", "6h", "--paused", "--id", id, "--output", "json")
		if code != 0 {
			t.Fatalf("kedge schedule etcd-snapshot: exit %d: %s %s", code, out, errOut)
		}
		h := world.client.ScheduleClient().GetHandle(ctx, id)
		defer func() { _ = h.Delete(context.Background()) }()
		began := time.Now()
		if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the scheduled snapshot", func() bool { return len(storedSnapshots(t, store)) == len(before)+1 })
		t.Logf("the scheduled etcd-snapshot stored a snapshot %s after its trigger", time.Since(began).Round(time.Millisecond))
	})

	// A runbook that changes controllers takes one first (snapshot=auto:
	// the inventory's first destination, local, as none is called
	// default).
	t.Run("cert-renewal takes one first", func(t *testing.T) {
		store := stores["local"](t)
		before := storedSnapshots(t, store)
		p, code, errOut := runWaitInv(t, "cert-renewal", inv, "--set", "threshold=1h")
		if code != 0 || p.State != workflows.StateSucceeded {
			t.Fatalf("cert-renewal: exit %d: %s\n%+v", code, errOut, p)
		}
		if s := step(t, p, "etcd-snapshot"); s.State != workflows.StateSucceeded {
			t.Errorf("cert-renewal's etcd-snapshot: %+v", s)
		}
		if after := storedSnapshots(t, store); len(after) != len(before)+1 {
			t.Errorf("snapshots before cert-renewal %v, after %v: want one more", before, after)
		}
	})

	t.Run("refused", func(t *testing.T) {
		store := stores["local"](t)
		before := storedSnapshots(t, store)
		tyc2 := typhoonHost(t, "tyc2")
		if out, err := tyc2.Exec(ctx, "systemctl", "stop", "etcd-member.service"); err != nil {
			t.Fatalf("stop etcd on tyc2: %v: %s", err, out)
		}
		restarted := false
		restart := func() {
			if restarted {
				return
			}
			restarted = true
			if out, err := tyc2.Exec(context.Background(), "systemctl", "start", "etcd-member.service"); err != nil {
				t.Errorf("start etcd on tyc2: %v: %s", err, out)
			}
		}
		defer restart()

		p, code, errOut, _ := snapshot(t, "local", "--set", "member=tyc2")
		st := step(t, p, "snapshot")
		if code == 0 || st.State != workflows.StateFailed || st.Attempts != 1 || !strings.Contains(st.LastError, "refusing a snapshot from tyc2: it does not answer") {
			t.Errorf("a snapshot from tyc2 with its etcd stopped: exit %d, %s after %d attempts: %s\n%s", code, st.State, st.Attempts, st.LastError, errOut)
		}
		p, code, errOut, _ = snapshot(t, "local", "--set", "requireHealthy=true")
		if st := step(t, p, "etcd-healthy"); code == 0 || st.State != workflows.StateFailed || !strings.Contains(st.LastError, "tyc2") {
			t.Errorf("requireHealthy with tyc2's etcd stopped: exit %d, etcd-healthy %s: %s\n%s", code, st.State, st.LastError, errOut)
		}
		if st := step(t, p, "snapshot"); st.Attempts != 0 {
			t.Errorf("requireHealthy with tyc2's etcd stopped: the snapshot ran: %+v", st)
		}
		if got := storedSnapshots(t, store); !slices.Equal(got, before) {
			t.Errorf("refused snapshots stored something: %v, before %v", got, before)
		}

		// A snapshot is most wanted when a member fails: without a member
		// named, one comes from a healthy one.
		p, code, errOut, took := snapshot(t, "local", "--set", "keepLast=2", "--set", "keepFor=0s")
		if code != 0 {
			t.Fatalf("etcd-snapshot with tyc2's etcd stopped: exit %d: %s\n%+v", code, errOut, p)
		}
		after := storedSnapshots(t, store)
		t.Logf("etcd-snapshot with tyc2's etcd stopped: %s; stored %v", took.Round(time.Millisecond), after)
		newest := after[len(after)-1]
		if m := readManifest(t, store, newest); m.Member == "tyc2" || !slices.Equal(m.Members, []string{"tyc1", "tyc2", "tyc3"}) {
			t.Errorf("the snapshot with tyc2's etcd stopped: %+v", m)
		}
		restart()
		eventually(t, 2*time.Minute, "etcd healthy again", func() bool {
			_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(ctx)
			return err == nil && slices.Equal(etcdMembers(t), []string{"tyc1", "tyc2", "tyc3"})
		})
	})
}

// storedSnapshots are the sealed snapshots of the Typhoon world's
// cluster in store, oldest first (their keys sort by time).
func storedSnapshots(t *testing.T, store objstore.Store) []string {
	t.Helper()
	return storedSnapshotsOf(t, store, typhoonCluster)
}

// storedSnapshotsOf are the sealed snapshots of cluster in store,
// oldest first.
func storedSnapshotsOf(t *testing.T, store objstore.Store, cluster string) []string {
	t.Helper()
	objs, err := store.List(t.Context(), cluster+"/etcd/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".snap.kseal") {
			keys = append(keys, o.Key)
		}
	}
	return keys
}

func readManifest(t *testing.T, store objstore.Store, key string) etcd.Manifest {
	t.Helper()
	r, err := store.Get(t.Context(), strings.TrimSuffix(key, ".snap.kseal")+".json")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var m etcd.Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkSealedSnapshot reads a stored snapshot: ciphertext with neither
// bbolt's magic nor a key name in it, which the world's codec key opens
// to the bytes whose size and sha256 its manifest gives, ending with
// etcd's own sha256, and holding key.
func checkSealedSnapshot(t *testing.T, store objstore.Store, object, key string) {
	t.Helper()
	r, err := store.Get(t.Context(), object)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range [][]byte{boltMagic, []byte("/registry/secrets"), []byte(key)} {
		if bytes.Contains(sealed, plain) {
			t.Errorf("%s holds %q in the clear", object, plain)
		}
	}
	m := readManifest(t, store, object)
	sr, err := sealstream.NewReader(bytes.NewReader(sealed), world.codec)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(sr)
	if err != nil {
		t.Fatalf("open %s with the codec key: %v", object, err)
	}
	sum := sha256.Sum256(snap)
	if hex.EncodeToString(sum[:]) != m.SHA256 || int64(len(snap)) != m.Size || m.KeyID != sr.KeyID() || m.Object != object || m.Cluster == "" || !strings.HasPrefix(object, m.Cluster+"/") {
		t.Errorf("%s opens to %d bytes, sha256 %x, key %s; its manifest: %+v", object, len(snap), sum, sr.KeyID(), m)
	}
	if inner := sha256.Sum256(snap[:len(snap)-sha256.Size]); !bytes.Equal(inner[:], snap[len(snap)-sha256.Size:]) {
		t.Errorf("%s does not end with etcd's sha256 of the bytes before it", object)
	}
	if !bytes.Contains(snap, boltMagic) || !bytes.Contains(snap, []byte(key)) {
		t.Errorf("%s does not open to etcd's database holding %s", object, key)
	}
	t.Logf("%s: %.1f MiB sealed to %.1f MiB, revision %d, from %s; opens to the manifest's sha256", object, float64(m.Size)/(1<<20), float64(len(sealed))/(1<<20), m.Revision, m.Member)
}
