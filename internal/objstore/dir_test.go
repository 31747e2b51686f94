package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newDir(t *testing.T) *Dir {
	t.Helper()
	d, err := NewDir(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func get(t *testing.T, s Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDirRoundTrip(t *testing.T) {
	ctx := context.Background()
	d := newDir(t)
	put := func(key, body string) {
		t.Helper()
		// strings.Reader is not what Put asks for; hide it behind a
		// plain io.Reader so no size is known.
		if err := d.Put(ctx, key, io.MultiReader(strings.NewReader(body))); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put("c1/etcd/snap-2.db", "two")
	put("c1/etcd/snap-1.db", "one")
	put("c1/etcd-other", "x")
	put("c2/etcd/snap-1.db", "other cluster")
	put("c1/etcd/snap-1.db", "one, replaced")

	if got := get(t, d, "c1/etcd/snap-1.db"); string(got) != "one, replaced" {
		t.Errorf("get: %q", got)
	}
	for prefix, want := range map[string][]string{
		"":                {"c1/etcd-other", "c1/etcd/snap-1.db", "c1/etcd/snap-2.db", "c2/etcd/snap-1.db"},
		"c1/etcd/":        {"c1/etcd/snap-1.db", "c1/etcd/snap-2.db"},
		"c1/etcd":         {"c1/etcd-other", "c1/etcd/snap-1.db", "c1/etcd/snap-2.db"},
		"c1/etcd/s":       {"c1/etcd/snap-1.db", "c1/etcd/snap-2.db"},
		"c3/":             nil,
		"c1/etcd-other/x": nil, // under a file
	} {
		objs, err := d.List(ctx, prefix)
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
			if o.Modified.IsZero() {
				t.Errorf("%s: no modification time", o.Key)
			}
		}
		if strings.Join(keys, " ") != strings.Join(want, " ") {
			t.Errorf("list %q: %q, want %q", prefix, keys, want)
		}
		if prefix == "c1/etcd/" && objs[0].Size != int64(len("one, replaced")) {
			t.Errorf("size %d", objs[0].Size)
		}
	}

	if err := d.Delete(ctx, "c1/etcd/snap-1.db"); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, "c1/etcd/snap-1.db"); err != nil {
		t.Errorf("a second delete: %v", err)
	}
	if _, err := d.Get(ctx, "c1/etcd/snap-1.db"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if _, err := d.Get(ctx, "c1/etcd"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get of a directory: %v, want ErrNotFound", err)
	}
	if err := d.Delete(ctx, "c1/etcd"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("delete of a directory: %v, want ErrInvalidKey", err)
	}
}

func TestDirModes(t *testing.T) {
	old := umask(0)
	defer umask(old)
	d := newDir(t)
	if err := d.Put(context.Background(), "a/b/snap", strings.NewReader("secret-ish")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{
		"":         0o700 | os.ModeDir,
		"a":        0o700 | os.ModeDir,
		"a/b":      0o700 | os.ModeDir,
		"a/b/snap": 0o600,
	} {
		st, err := os.Stat(filepath.Join(d.Path(), name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%q: mode %v, want %v", name, st.Mode(), want)
		}
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("source broke")
	}
	f.n--
	return copy(p, "partial data "), nil
}

// A Put whose reader fails leaves the old object whole and no temporary
// file behind.
func TestDirPutFailureKeepsOld(t *testing.T) {
	ctx := context.Background()
	d := newDir(t)
	if err := d.Put(ctx, "k/snap", strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "k/snap", &failingReader{n: 3}); err == nil {
		t.Fatal("a put whose reader failed succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Put(cctx, "k/snap", strings.NewReader("new")); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled put: %v", err)
	}
	if got := get(t, d, "k/snap"); string(got) != "old" {
		t.Errorf("after failed puts: %q", got)
	}
	entries, err := os.ReadDir(filepath.Join(d.Path(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// Files being written (a Put in flight, or one a crash left) are not
// objects.
func TestDirListSkipsTemporaries(t *testing.T) {
	d := newDir(t)
	if err := d.Put(context.Background(), "k/snap", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Path(), "k", tmpPrefix+"snap-1234"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := d.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != "k/snap" {
		t.Errorf("list: %v", objs)
	}
}

var attackerKeys = []string{
	"../x", "/etc/passwd", "a/../../b", "..", ".", "a/./b", "a//b", "a/", "/",
	"", ".hidden", "a/.tmp-x", `a\..\b`, "a b", "a\x00b", "a\nb", "snap\u00e9",
	"-rf", strings.Repeat("a", MaxKeyLen+1),
}

func TestKeysAttacker(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	d := newDir(t)
	for _, key := range attackerKeys {
		if err := ValidKey(key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v", key, err)
		}
		if err := d.Put(ctx, key, strings.NewReader("pwned")); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) = %v", key, err)
		}
		if _, err := d.Get(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) = %v", key, err)
		}
		if err := d.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v", key, err)
		}
		if key != "" && key != "a/" {
			if _, err := d.List(ctx, key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("List(%q) = %v", key, err)
			}
		}
	}
	for _, key := range []string{"snap", "c1/etcd/2026-11-09T00-35-41Z.db.sealed", "A_b-c.d/e"} {
		if err := ValidKey(key); err != nil {
			t.Errorf("ValidKey(%q) = %v", key, err)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 0 {
		t.Errorf("written outside: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(d.Path()), "x")); err == nil {
		t.Error("../x was written")
	}
}

// A symbolic link planted in the directory does not lead out of it.
func TestDirSymlinkDoesNotEscape(t *testing.T) {
	ctx := context.Background()
	d := newDir(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(d.Path(), "link")); err != nil {
		t.Fatal(err)
	}
	if rc, err := d.Get(ctx, "link/secret"); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Errorf("read through a symlink: %q", b)
	}
	if err := d.Put(ctx, "link/planted", strings.NewReader("x")); err == nil {
		t.Error("wrote through a symlink")
	}
	if err := d.Delete(ctx, "link/secret"); err == nil {
		t.Error("deleted through a symlink")
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || !bytes.Equal(b, []byte("host secret")) {
		t.Errorf("outside file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("planted outside")
	}
	objs, err := d.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Errorf("list follows the link: %v", objs)
	}
}
