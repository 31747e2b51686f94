package upstream

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sums reads SHA256SUMS (sha256sum's format: hex, two spaces, path).
func sums(t *testing.T) map[string]string {
	t.Helper()
	data, err := fs.ReadFile(FS(), "SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS:%d: not \"<sha256>  <path>\": %q", n, sc.Text())
		}
		want[name] = sum
	}
	if len(want) == 0 {
		t.Fatal("SHA256SUMS lists no files")
	}
	return want
}

// TestVendoredFilesUnchanged fails when a vendored file is edited, added or
// removed: they are copies of upstream, see SOURCE.md to refresh them.
func TestVendoredFilesUnchanged(t *testing.T) {
	want := sums(t)
	// On disk, so a file added but not embedded is seen too.
	got := map[string]string{}
	for _, root := range []string{Typhoon, Bootstrap} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			got[filepath.ToSlash(path)] = hex.EncodeToString(sum[:])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for name := range want {
		names = append(names, name)
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		w, inSums := want[name]
		g, onDisk := got[name]
		switch {
		case !onDisk:
			t.Errorf("%s: listed in SHA256SUMS but missing", name)
		case !inSums:
			t.Errorf("%s: not in SHA256SUMS (vendored files come from upstream unchanged: see SOURCE.md)", name)
		case w != g:
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s: vendored files are kept unchanged (see SOURCE.md)", name, g, w)
		}
	}
}

// TestEmbedded checks that what FS serves is what is on disk.
func TestEmbedded(t *testing.T) {
	for name, sum := range sums(t) {
		data, err := ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: embedded copy differs from SHA256SUMS", name)
		}
	}
	for _, name := range []string{FlatcarController, FlatcarWorker, FCOSController, FCOSWorker, KubeconfigAdmin, KubeconfigBootstrap, StaticManifests + "/kube-apiserver.yaml", Manifests + "/bootstrap-token.yaml"} {
		if _, err := ReadFile(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
