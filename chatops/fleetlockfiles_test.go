package chatops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fleetLockWorld is a config serving FleetLock for mercury (worker-1's
// client ID "z-1"), its inventory and an empty runbook directory.
func fleetLockWorld(t testing.TB) (s *Server, inv, rbDir string) {
	t.Helper()
	dir := t.TempDir()
	text, err := os.ReadFile("testdata/mercury.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inv = filepath.Join(dir, "mercury.yaml")
	withID := strings.Replace(string(text), "    address: 127.0.10.2\n", "    address: 127.0.10.2\n    fleetLockId: z-1\n", 1)
	if err := os.WriteFile(inv, []byte(withID), 0o644); err != nil {
		t.Fatal(err)
	}
	rbDir = filepath.Join(dir, "runbooks")
	if err := os.Mkdir(rbDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fl.key"), []byte("fleetlock-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := `apiVersion: kedge/v1
kind: ChatOps
clusters:
  mercury:
    inventory: mercury.yaml
    fleetLock: {keyFile: fl.key, drainTimeout: 2m}
runbookPath: [runbooks]
allow: []
`
	if err := os.WriteFile(filepath.Join(dir, "chatops.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(filepath.Join(dir, "chatops.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &Server{Config: c}, inv, rbDir
}

// touch rewrites a file with text and moves its modification time on,
// as an edit a moment later does.
func touch(t *testing.T, path, text string, later time.Duration) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(later)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// The FleetLock endpoint parses a cluster's inventory and the
// coordinator's runbooks once for a burst of requests, and again when a
// file changed: an edit of the same size, a runbook put in the runbook
// path, and taken away again.
func TestFleetLockFilesParsedOncePerVersion(t *testing.T) {
	s, inv, rbDir := fleetLockWorld(t)
	for range 50 {
		if _, err := s.fleetLockCluster("mercury"); err != nil {
			t.Fatal(err)
		}
		in, err := s.fleetLockInput("mercury")
		if err != nil {
			t.Fatal(err)
		}
		if in.DrainTimeout != 2*time.Minute || in.Drain.Name != fleetLockDrainRunbook || in.Release.Name != fleetLockReleaseRunbook {
			t.Fatalf("input %+v", in)
		}
	}
	if s.flFiles.parses != 1 {
		t.Errorf("%d parses for 100 lookups of unchanged files, want 1", s.flFiles.parses)
	}

	// The same size, another client ID, a moment later.
	text, _ := os.ReadFile(inv)
	touch(t, inv, strings.Replace(string(text), "fleetLockId: z-1", "fleetLockId: z-9", 1), 2*time.Second)
	c, err := s.fleetLockCluster("mercury")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Node("worker-1"); n.FleetLockID != "z-9" || s.flFiles.parses != 2 {
		t.Errorf("after the edit: client ID %q, %d parses", n.FleetLockID, s.flFiles.parses)
	}

	// A drain runbook of the operator's, without the drainTimeout the
	// config sets, is found before the built-in one, and refused.
	own := filepath.Join(rbDir, fleetLockDrainRunbook+".yaml")
	touch(t, own, `apiVersion: kedge/v1
kind: Runbook
metadata: {name: fleetlock-drain}
params:
  node: {type: string, required: true}
steps:
  - id: cordon
    action: kube.cordon
    on: ${ params.node }
`, 0)
	if _, err := s.fleetLockInput("mercury"); err == nil || !strings.Contains(err.Error(), "no param drainTimeout") {
		t.Errorf("a drain runbook without drainTimeout: %v", err)
	}
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}
	if _, err := s.fleetLockInput("mercury"); err != nil {
		t.Errorf("back to the built-in drain runbook: %v", err)
	}
	if s.flFiles.parses != 4 {
		t.Errorf("%d parses, want 4", s.flFiles.parses)
	}
}

// BenchmarkFleetLockInput is what a FleetLock request spends on the
// files: looking at them (cached), or parsing them as before the cache.
func BenchmarkFleetLockInput(b *testing.B) {
	s, _, _ := fleetLockWorld(b)
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.fleetLockInput("mercury"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parsed", func(b *testing.B) {
		for b.Loop() {
			s.flFiles.mu.Lock()
			s.flFiles.byCluster = nil
			s.flFiles.mu.Unlock()
			if _, err := s.fleetLockInput("mercury"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
