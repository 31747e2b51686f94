package srcroot

import (
	"os"
	"path/filepath"
	"testing"
)

// From a package's directory (where go test runs it), the root is the
// tree's: the directory holding this module's go.mod, two levels up.
func TestDirIsTheTreesRoot(t *testing.T) {
	got, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if want := filepath.Dir(filepath.Dir(wd)); got != want {
		t.Errorf("Dir() = %s, want %s", got, want)
	}
}

// Another module's go.mod (a tools module, say) is not the root.
func TestDeclaresOnlyThisModule(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]bool{
		"module kedge.dev/kedge\n\ngo 1.26\n": true,
		"// c\nmodule \"kedge.dev/kedge\"\n":  true,
		"module kedge.dev/kedge/tools/kube\n": false,
		"module example.com/other\n":          false,
	} {
		p := filepath.Join(dir, "go.mod")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := declares(p); got != want {
			t.Errorf("declares(%q) = %v, want %v", body, got, want)
		}
	}
}
