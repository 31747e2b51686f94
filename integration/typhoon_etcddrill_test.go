package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	failurepb "go.temporal.io/api/failure/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/integration/s3lab"
	"kedge.dev/kedge/workflows"
)

// The keys every Kubernetes cluster's etcd holds: etcd-restore-drill's
// default expectKeys.
var kubernetesKeys = []string{"/registry/namespaces/default", "/registry/namespaces/kube-system"}

// TestEtcdRestoreDrillOnTyphoonCluster restores the Typhoon world's
// etcd (three real members) from the snapshots etcd-snapshot stored: a
// Secret is written, a snapshot taken into the worker's directory and
// into a real S3-compatible server, and etcd-restore-drill restores each
// into a throwaway etcd on the worker that holds the Secret and
// Kubernetes' own namespaces at the snapshot's revision. A drill that
// expects a Secret written after the snapshot fails naming it; one with
// maxAge shorter than the snapshot's age fails; one of a snapshot whose
// stored object lost a bit is refused before anything is restored
// (EtcdSnapshotInvalid). Scheduled weekly as the README's team setup
// does, a triggered run of the drill succeeds.
func TestEtcdRestoreDrillOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	adoptTyphoon(t)
	ctx := t.Context()
	canary := drillSecret(t, "drill-canary")
	canaryKey := "/registry/secrets/default/drill-canary"
	inv, local, _ := typhoonBackupsInventory(t)

	for _, dest := range []string{"local", "offsite"} {
		began := time.Now()
		if p, code, errOut := runWaitInv(t, "etcd-snapshot", inv, "--set", "destination="+dest); code != 0 {
			t.Fatalf("etcd-snapshot into %s: exit %d: %s\n%+v", dest, code, errOut, p)
		}
		t.Logf("etcd-snapshot into %s: %s", dest, time.Since(began).Round(time.Millisecond))
	}
	snapshotsTaken := time.Now()
	late := drillSecret(t, "drill-late")
	lateKey := "/registry/secrets/default/drill-late"

	expect := append(slices.Clone(kubernetesKeys), canaryKey)
	expectFile := keysFile(t, expect)
	for _, dest := range []string{"local", "offsite"} {
		t.Run("from "+dest, func(t *testing.T) {
			p, res, f, took := drill(t, inv, "--set", "destination="+dest, "--set-file", "expectKeys="+expectFile, "--set", "maxAge=1h")
			if p.State != workflows.StateSucceeded || f != nil {
				t.Fatalf("the drill from %s: %s: %s (%v)", dest, p.State, p.Error, f)
			}
			if st := step(t, p, "fresh"); st.State != workflows.StateSucceeded {
				t.Errorf("maxAge 1h of a snapshot %s old: fresh %s: %s", res.Age, st.State, st.LastError)
			}
			if !slices.Equal(res.Found, expect) || len(res.Missing) != 0 {
				t.Errorf("the restored etcd holds %v, lacks %v; want %v", res.Found, res.Missing, expect)
			}
			// A Secret's resourceVersion is etcd's revision of its write.
			if rv, _ := strconv.ParseInt(canary.ResourceVersion, 10, 64); res.Revision < res.ManifestRevision || res.ManifestRevision < rv || res.Keys < int64(len(expect)) {
				t.Errorf("restored at revision %d with %d keys; the manifest's revision %d, the canary's write %d", res.Revision, res.Keys, res.ManifestRevision, rv)
			}
			if !strings.HasPrefix(res.Snapshot, typhoonCluster+"/etcd/") || res.KeyID != world.codec.ActiveKey() || res.AgeSeconds < 0 {
				t.Errorf("the drill's result: %+v", res)
			}
			t.Logf("etcd-restore-drill from %s: %s end to end; %s (%.1f MiB, %s old): revision %d, %d keys; fetched and checked in %d ms, restored and answering in %d ms",
				dest, took.Round(time.Millisecond), res.Snapshot, float64(res.Size)/(1<<20), res.Age, res.Revision, res.Keys, res.FetchMillis, res.RestoreMillis)
		})
	}

	t.Run("a key written after the snapshot", func(t *testing.T) {
		p, res, f, _ := drill(t, inv, "--set", "destination=local", "--set-file", "expectKeys="+keysFile(t, append(slices.Clone(expect), lateKey)))
		st := step(t, p, "drill")
		if p.State != workflows.StateFailed || st.Attempts != 1 || f.GetApplicationFailureInfo().GetType() != errtype.EtcdDrillFailed ||
			!strings.Contains(st.LastError, "lacks 1 of the 4 keys expected: \""+lateKey+"\"") {
			t.Fatalf("a drill expecting %s: %s after %d attempts (%s): %s", lateKey, p.State, st.Attempts, f.GetApplicationFailureInfo().GetType(), st.LastError)
		}
		if rv, _ := strconv.ParseInt(late.ResourceVersion, 10, 64); !slices.Equal(res.Missing, []string{lateKey}) || !slices.Equal(res.Found, expect) || rv <= res.Revision {
			t.Errorf("the failed drill's result: found %v, missing %v at revision %d (the late Secret's write: %d)", res.Found, res.Missing, res.Revision, rv)
		}
		t.Logf("refused: %s", st.LastError)
	})

	t.Run("a snapshot older than maxAge", func(t *testing.T) {
		eventually(t, 5*time.Second, "the snapshots to be 2s old", func() bool { return time.Since(snapshotsTaken) > 2*time.Second })
		p, res, _, _ := drill(t, inv, "--set", "destination=local", "--set", "maxAge=1s")
		st := step(t, p, "fresh")
		if p.State != workflows.StateFailed || st.State != workflows.StateFailed || !strings.Contains(st.LastError, "old: older than maxAge 1s") {
			t.Fatalf("a drill with maxAge 1s of a snapshot %s old: %s, fresh %s: %s", res.Age, p.State, st.State, st.LastError)
		}
		if !slices.Equal(res.Found, kubernetesKeys) {
			t.Errorf("the default expectKeys: found %v, want %v", res.Found, kubernetesKeys)
		}
		t.Logf("refused: %s", st.LastError)
	})

	// Weekly, as the README's team setup schedules it: triggered now,
	// the drill succeeds.
	t.Run("scheduled", func(t *testing.T) {
		id := "etcd-restore-drill/" + typhoonCluster
		out, errOut, code := kedge(t, "schedule", "etcd-restore-drill", "--inventory", inv, "--set", "destination=local",
			"--set-file", "expectKeys="+expectFile, "--set", "maxAge=13h", "--every", "168h", "--paused", "--output", "json")
		if code != 0 {
			t.Fatalf("kedge schedule etcd-restore-drill: exit %d: %s %s", code, out, errOut)
		}
		h := world.client.ScheduleClient().GetHandle(ctx, id)
		defer func() { _ = h.Delete(context.Background()) }()
		run := triggered(t, h, 0)
		if err := waitClosed(t, run.WorkflowID, 5*time.Minute); err != nil {
			t.Fatalf("the scheduled drill %s: %v", run.WorkflowID, err)
		}
		res, f := drillOutcome(t, run.WorkflowID)
		if f != nil || !slices.Equal(res.Found, expect) {
			t.Errorf("the scheduled drill: %+v (%v)", res, f)
		}
	})

	t.Run("a tampered object", func(t *testing.T) {
		snaps, err := filepath.Glob(filepath.Join(local, typhoonCluster, "etcd", "*.snap.kseal"))
		if err != nil || len(snaps) != 1 {
			t.Fatalf("the local destination's snapshots: %v (%v)", snaps, err)
		}
		flipByte(t, snaps[0])
		before := drillDirs(t)
		p, res, f, _ := drill(t, inv, "--set", "destination=local")
		st := step(t, p, "drill")
		if p.State != workflows.StateFailed || st.Attempts != 1 || f.GetApplicationFailureInfo().GetType() != errtype.EtcdSnapshotInvalid ||
			!strings.Contains(st.LastError, "is not restored") {
			t.Fatalf("a drill of a tampered snapshot: %s after %d attempts (%s): %s", p.State, st.Attempts, f.GetApplicationFailureInfo().GetType(), st.LastError)
		}
		// A drill carries its result once its etcd answered: this one has
		// none, it never restored.
		if res.Snapshot != "" || f.GetApplicationFailureInfo().GetDetails() != nil {
			t.Errorf("the refused drill restored: %+v", res)
		}
		if after := drillDirs(t); !slices.Equal(after, before) {
			t.Errorf("the refused drill left %v", after)
		}
		t.Logf("refused: %s", st.LastError)
	})
}

// drillSecret writes a Secret default/NAME through the Typhoon world's
// API server (replacing one an earlier run left) and returns it as
// written.
func drillSecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	return writeSecret(t, typhoonBuilt.client, name)
}

// writeSecret writes a Secret default/NAME through cs (replacing one an
// earlier run left) and returns it as written.
func writeSecret(t *testing.T, cs kubernetes.Interface, name string) *corev1.Secret {
	t.Helper()
	secrets := cs.CoreV1().Secrets("default")
	if err := secrets.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete an earlier %s: %v", name, err)
	}
	s, err := secrets.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		StringData: map[string]string{"written": time.Now().UTC().Format(time.RFC3339Nano)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// typhoonBackupsInventory is the Typhoon world's inventory with the
// destinations of backupsInventory.
func typhoonBackupsInventory(t *testing.T) (inv, local string, srv *s3lab.Server) {
	t.Helper()
	return backupsInventory(t, typhoonBuilt.inventory)
}

// backupsInventory is the inventory base with two backup destinations:
// local, a directory on the worker (returned), and offsite, a bucket of
// a real S3-compatible server started for the test. The world's worker
// serves base again after the test.
func backupsInventory(t *testing.T, base string) (inv, local string, srv *s3lab.Server) {
	t.Helper()
	srv = s3lab.StartT(t, s3lab.Options{})
	dir := t.TempDir()
	local = filepath.Join(dir, "backups")
	creds := filepath.Join(dir, "s3.credentials")
	if err := os.WriteFile(creds, fmt.Appendf(nil, "[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	inv = filepath.Join(dir, "inventory.yaml")
	backups := fmt.Sprintf(`backups:
  local: {kind: local, path: %s}
  offsite: {kind: s3, endpoint: "http://%s", insecure: true, bucket: %s, region: %q, credentialsFile: %s}
`, local, srv.Endpoint, srv.Bucket, srv.Region, creds)
	if err := os.WriteFile(inv, append(data, backups...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { workerServes(base) })
	return inv, local, srv
}

// keysFile writes keys as a list param's value: comma-separated. The
// CLI's --set splits its values at commas (urfave/cli's string slices),
// so a list of more than one item is given with --set-file.
func keysFile(t *testing.T, keys []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "expect-keys")
	if err := os.WriteFile(p, []byte(strings.Join(keys, ",")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// drill runs etcd-restore-drill and returns the run's progress, the
// drill step's result (from its failure's details when it failed after
// its etcd answered), its failure, and how long the run took.
func drill(t *testing.T, inv string, args ...string) (workflows.Progress, etcd.RestoreDrillResult, *failurepb.Failure, time.Duration) {
	t.Helper()
	began := time.Now()
	p, _, _ := runWaitInv(t, "etcd-restore-drill", inv, args...)
	took := time.Since(began)
	res, f := drillOutcome(t, p.WorkflowID)
	return p, res, f, took
}

// drillOutcome reads the etcd.restore-drill activity's end from a run's
// history: its result, or its failure and the result the failure
// carries.
func drillOutcome(t *testing.T, id string) (etcd.RestoreDrillResult, *failurepb.Failure) {
	t.Helper()
	var res etcd.RestoreDrillResult
	scheduled := int64(-1)
	for _, e := range events(t, world.client, id, "") {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == etcd.RestoreDrillAction {
			scheduled = e.GetEventId()
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && a.GetScheduledEventId() == scheduled {
			if err := world.codec.DataConverter().FromPayloads(a.GetResult(), &res); err != nil {
				t.Fatalf("decode the drill's result in %s: %v", id, err)
			}
			return res, nil
		}
		if a := e.GetActivityTaskFailedEventAttributes(); a != nil && a.GetScheduledEventId() == scheduled {
			f := a.GetFailure()
			for f.GetApplicationFailureInfo() == nil && f.GetCause() != nil {
				f = f.GetCause()
			}
			if d := f.GetApplicationFailureInfo().GetDetails(); d != nil {
				if err := world.codec.DataConverter().FromPayloads(d, &res); err != nil {
					t.Fatalf("decode the drill's failure details in %s: %v", id, err)
				}
			}
			return res, f
		}
	}
	t.Fatalf("no end of %s in the history of %s", etcd.RestoreDrillAction, id)
	return res, nil
}

// flipByte inverts one byte in the middle of a file, as a disk or a
// store that lost a bit would.
func flipByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// drillDirs are the directories drills made on the worker and left.
func drillDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "kedge-etcd-drill-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
