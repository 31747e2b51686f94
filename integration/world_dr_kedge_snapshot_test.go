package integration

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/workflows"
)

// TestEtcdSnapshotOnKedgeLayout runs etcd-snapshot and etcd-restore-drill
// on Kedge's own layout: etcd as static pods on three controllers, its CA
// made by bootstrap in Vault. A Secret is written, a snapshot taken with
// every member healthy into the worker's directory and into a real
// S3-compatible server; each stored object is ciphertext (no bbolt
// magic, no key name) that opens with the codec key, and the drill
// restores it into a throwaway etcd holding the Secret. A second
// snapshot with keepLast 1 deletes the first. It changes nothing of
// the world, which goes on to the lane's next test (the restore).
func TestEtcdSnapshotOnKedgeLayout(t *testing.T) {
	kedgeHALane.join(t)
	w := kedgeHAWorld(t)
	w.handOn = true
	canary := writeSecret(t, w.client, "kedge-layout-canary")
	key := "/registry/secrets/default/kedge-layout-canary"
	inv, local, srv := backupsInventory(t, w.inventory)
	stores := map[string]objstore.Store{"local": must(objstore.NewDir(local)), "offsite": s3Store(t, srv, srv.SecretKey)}
	expect := append(slices.Clone(kubernetesKeys), key)
	expectFile := keysFile(t, expect)
	for _, dest := range []string{"local", "offsite"} {
		t.Run(dest, func(t *testing.T) {
			began := time.Now()
			p, code, errOut := runWaitInv(t, "etcd-snapshot", inv, "--set", "destination="+dest, "--set", "requireHealthy=true")
			took := time.Since(began)
			if code != 0 {
				t.Fatalf("etcd-snapshot into %s: exit %d: %s\n%+v", dest, code, errOut, p)
			}
			snaps := storedSnapshotsOf(t, stores[dest], w.cluster)
			if len(snaps) != 1 {
				t.Fatalf("snapshots of %s in %s: %v, want one", w.cluster, dest, snaps)
			}
			checkSealedSnapshot(t, stores[dest], snaps[0], key)
			if m := readManifest(t, stores[dest], snaps[0]); !slices.Equal(m.Members, []string{"kha-1", "kha-2", "kha-3"}) {
				t.Errorf("the snapshot's members: %v", m.Members)
			}
			t.Logf("etcd-snapshot of Kedge's layout into %s: %s end to end", dest, took.Round(time.Millisecond))

			p, res, f, drillTook := drill(t, inv, "--set", "destination="+dest, "--set-file", "expectKeys="+expectFile)
			if p.State != workflows.StateSucceeded || f != nil {
				t.Fatalf("the drill from %s: %s: %s (%v)", dest, p.State, p.Error, f)
			}
			rv, _ := strconv.ParseInt(canary.ResourceVersion, 10, 64)
			if !slices.Equal(res.Found, expect) || len(res.Missing) != 0 || res.ManifestRevision < rv || res.Snapshot != snaps[0] {
				t.Errorf("the drill from %s: %+v; want %v found at a revision after %d in %s", dest, res, expect, rv, snaps[0])
			}
			t.Logf("etcd-restore-drill of Kedge's layout from %s: %s end to end (%.1f MiB, revision %d, %d keys; fetched and checked in %d ms, restored and answering in %d ms)",
				dest, drillTook.Round(time.Millisecond), float64(res.Size)/(1<<20), res.Revision, res.Keys, res.FetchMillis, res.RestoreMillis)

			// Retention: with keepLast 1 (and no keepFor) a second
			// snapshot deletes the first.
			if p, code, errOut := runWaitInv(t, "etcd-snapshot", inv, "--set", "destination="+dest, "--set", "keepLast=1", "--set", "keepFor=0s"); code != 0 {
				t.Fatalf("second etcd-snapshot into %s: exit %d: %s\n%+v", dest, code, errOut, p)
			}
			if after := storedSnapshotsOf(t, stores[dest], w.cluster); len(after) != 1 || after[0] == snaps[0] {
				t.Errorf("after a second snapshot with keepLast=1 in %s: %v; the first was %s", dest, after, snaps[0])
			}
		})
	}
}
