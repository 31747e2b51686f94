package runbooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"
)

// fuzzSeeds are the package's runbook fixtures, good and bad.
func fuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: x}\nsteps: [{id: a, action: kedge.check, with: {that: '${ 1 +', message: m}}]\n"))
}

// FuzzLoadRunbook: any bytes load or fail with FILE:LINE:COL errors;
// nothing panics.
func FuzzLoadRunbook(f *testing.F) {
	fuzzSeeds(f)
	cluster, err := inventory.LoadFile("testdata/inventory.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := source.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		if len(docs) != 1 {
			return
		}
		lib := &Library{}
		if _, err := lib.load(docs, cluster); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if line != "" && !strings.HasPrefix(line, "fuzz.yaml:") && !strings.HasPrefix(line, "no runbook named") && !strings.HasPrefix(line, "builtin:") {
					t.Fatalf("error without a position: %q", line)
				}
			}
		}
	})
}

// FuzzDecodeInventory: any bytes decode or fail with positions.
func FuzzDecodeInventory(f *testing.F) {
	for _, p := range []string{"testdata/inventory.yaml", "testdata/bad/bad-inventory.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("apiVersion: kedge/v1\nkind: Cluster\nmetadata: {name: a}\nworkers: [{name: w, address: '::1', nodeName: W}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := source.Parse("inv.yaml", data)
		if err != nil || len(docs) != 1 {
			return
		}
		if _, err := inventory.Decode(docs[0]); err != nil && !strings.HasPrefix(err.Error(), "inv.yaml:") {
			t.Fatalf("error without a position: %v", err)
		}
	})
}
