package runbooks

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/runbooks/inventory"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testCluster(t *testing.T) *inventory.Cluster {
	t.Helper()
	c, err := inventory.LoadFile("testdata/inventory.yaml")
	if err != nil {
		t.Fatalf("load inventory: %v", err)
	}
	return c
}

// golden compares got with testdata/NAME.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
	}
}

func TestBadRunbooksAreRejectedWithPositions(t *testing.T) {
	cluster := testCluster(t)
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if name == "restart-demo" || name == "bad-inventory" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			lib := &Library{}
			_, err := lib.LoadFile(f, cluster)
			if err == nil {
				t.Fatal("loaded without error")
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, f+":") {
					t.Errorf("error line does not start with FILE:LINE:COL: %q", line)
				}
			}
			golden(t, "bad/"+name, err.Error()+"\n")
		})
	}
}

func TestBadInventoryIsRejectedWithPositions(t *testing.T) {
	_, err := inventory.LoadFile("testdata/bad/bad-inventory.yaml")
	if err == nil {
		t.Fatal("loaded without error")
	}
	golden(t, "bad/bad-inventory", err.Error()+"\n")
}

func TestGoodRunbookLoadsWithChildren(t *testing.T) {
	cluster := testCluster(t)
	lib := &Library{}
	l, err := lib.LoadFile("testdata/good/deploy.yaml", cluster)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if l.Runbook.Name != "deploy" || len(l.Runbook.Steps) != 4 {
		t.Fatalf("unexpected runbook %+v", l.Runbook)
	}
	if _, ok := l.Children["restart-demo"]; !ok {
		t.Fatalf("child runbook not loaded: %v", l.Children)
	}
	if got := l.Runbook.Steps[1].Retry.WithDefaults(); got.MaxAttempts != 4 || got.Backoff != 1.5 {
		t.Errorf("retry = %+v", got)
	}
}

func TestResolveParams(t *testing.T) {
	cluster := testCluster(t)
	l, err := (&Library{}).LoadFile("testdata/good/deploy.yaml", cluster)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ResolveParams(l.Runbook, map[string]any{"message": "hi", "attempts": "5", "nodes": "controllers,worker-2"}, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if got["attempts"] != int64(5) || got["restart"] != true || got["message"] != "hi" {
		t.Errorf("params = %v", got)
	}
	nodes := got["nodes"].([]any)
	if len(nodes) != 2 || nodes[0] != "controller-1" || nodes[1] != "worker-2" {
		t.Errorf("nodes = %v", nodes)
	}

	_, err = ResolveParams(l.Runbook, map[string]any{"mesage": "x", "restart": "maybe", "nodes": "worker-7"}, cluster)
	if err == nil {
		t.Fatal("bad params accepted")
	}
	for _, want := range []string{`no param "mesage" (did you mean "message"?)`, `needs param "message"`, `"maybe" is not true or false`, `no node "worker-7"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	r := (&Retry{InitialInterval: 1e9, Backoff: 2, MaxInterval: 5e9}).WithDefaults()
	for n, want := range map[int]float64{1: 1, 2: 2, 3: 4, 4: 5, 10: 5} {
		if got := r.Delay(n).Seconds(); got != want {
			t.Errorf("Delay(%d) = %vs, want %vs", n, got, want)
		}
	}
}

func TestBuiltinRunbooksAreValid(t *testing.T) {
	cluster := testCluster(t)
	entries, err := fs.ReadDir(Builtin, ".")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no built-in runbooks: %v", err)
	}
	lib := &Library{Builtin: Builtin}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		l, err := lib.Load(name, cluster)
		if err != nil {
			t.Errorf("built-in %s: %v", name, err)
			continue
		}
		if l.Runbook.Name != name {
			t.Errorf("built-in file %s holds runbook %q", e.Name(), l.Runbook.Name)
		}
	}
}

// A runbook found by name must carry that name: a renamed copy of a
// runbook would otherwise run under another name's lock and grants.
func TestRunbookFoundByNameMustBeNamedSo(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("builtin/kubelet-image-swap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "swap2.yaml"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	lib := &Library{Dirs: []string{dir}, Builtin: Builtin}
	_, err = lib.Load("swap2", testCluster(t))
	want := filepath.Join(dir, "swap2.yaml") + `:4:9: metadata.name "kubelet-image-swap" is not the file's name "swap2"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a renamed copy: %v\nwant %s", err, want)
	}
	if _, err := lib.Load("kubelet-image-swap", testCluster(t)); err != nil {
		t.Errorf("the built-in: %v", err)
	}
}
