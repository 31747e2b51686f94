package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/workflows"
)

// snapshotAttackRunbook is a runbook an author writes to have the worker
// put a snapshot of etcd where the author chooses: destination is the
// YAML the author puts there.
func snapshotAttackRunbook(destination string) string {
	return `apiVersion: kedge/v1
kind: Runbook
metadata: {name: snapshot-elsewhere}
steps:
  - id: snap
    action: etcd.snapshot
    with:
      endpoints: [https://127.0.0.1:1]
      caCert: not-a-ca
      issuer: etcd
      destination: ` + destination + "\n"
}

// TestEtcdSnapshotDestinationFromTheRunbookRefused is the runbook
// author's attack on etcd.snapshot: a runbook that gives the worker a
// directory of its choosing or an S3 endpoint of its choosing, raw or as
// a destination object, or that names a destination the worker's
// inventory of the cluster does not define, is refused, and nothing is
// written: no directory made, no request to the endpoint. Destinations
// are defined by the worker's operator, in the inventory's backups
// section, and a run names one.
func TestEtcdSnapshotDestinationFromTheRunbookRefused(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	defined := filepath.Join(dir, "operators-backups")
	inv := filepath.Join(dir, "inventory.yaml")
	body := lab.Inventory("snapattack", world.lab, world.lab.KnownHostsFile) +
		"vault:\n  address: http://127.0.0.1:1\n" +
		"backups:\n  local:\n    kind: local\n    path: " + defined + "\n"
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer s3.Close()
	creds := filepath.Join(dir, "s3.credentials")
	if err := os.WriteFile(creds, []byte("aws_access_key_id = author\naws_secret_access_key = author-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chosen := filepath.Join(dir, "authors-choice")
	notAName := "is not a destination's name: a run names one of the destinations the worker's inventory of cluster snapattack defines under backups:, never a path or an endpoint"
	for _, c := range []struct{ name, destination, says string }{
		{"a local destination object", fmt.Sprintf("{kind: local, path: %s}", chosen), "input destination must be a string, got a mapping"},
		{"a raw path", chosen, notAName},
		{"an S3 destination object", fmt.Sprintf("{kind: s3, endpoint: %s, bucket: stolen, insecure: true, credentialsFile: %s}", s3.URL, creds), "input destination must be a string, got a mapping"},
		{"a raw endpoint", s3.URL, notAName},
		{"a name the inventory does not define", "offsite", `the inventory defines no backup destination "offsite" under backups: (it defines: local)`},
		{"a name with a path in it", "local/../../etc", notAName},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Refused before the run starts (kedge run prints no
			// progress) or by the worker (the run fails).
			out, errOut, code := kedge(t, "run", writeRunbook(t, snapshotAttackRunbook(c.destination)), "--inventory", inv, "--wait", "--output", "json")
			if code == 0 {
				t.Fatalf("a runbook's destination %s was accepted: %s", c.destination, out)
			}
			var p workflows.Progress
			if json.Unmarshal([]byte(out), &p) == nil && len(p.Steps) > 0 {
				st := step(t, p, "snap")
				if st.Attempts != 1 || !strings.Contains(st.LastError, c.says) {
					t.Errorf("the worker's refusal: %d attempts: %s; want %q", st.Attempts, st.LastError, c.says)
				}
				t.Logf("refused by the worker: %s", st.LastError)
			} else {
				if !strings.Contains(errOut, c.says) {
					t.Errorf("refused before the run: %s; want %q", errOut, c.says)
				}
				t.Logf("refused before the run (exit %d): %s", code, strings.TrimSpace(errOut))
			}
			if _, err := os.Stat(chosen); err == nil {
				t.Errorf("the author's directory %s was made", chosen)
			}
			if _, err := os.Stat(defined); err == nil {
				t.Errorf("the operator's directory %s was made for a refused run", defined)
			}
			if n := hits.Load(); n > 0 {
				t.Errorf("the author's endpoint got %d requests", n)
			}
		})
	}
}
