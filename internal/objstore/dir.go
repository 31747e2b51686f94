package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Dir is a Store in a directory of the worker's filesystem: each object is
// a file (mode 0600) under directories (mode 0700) named by the key's
// segments. Every access goes through an os.Root, so not even a symbolic
// link planted in the directory leads out of it.
type Dir struct {
	path string
}

var _ Store = (*Dir)(nil)

// tmpPrefix starts the names of files being written: ValidKey refuses a
// segment that starts with '.', so no key names one and List skips them.
const tmpPrefix = ".tmp-"

// NewDir returns the Store in dir, creating it (mode 0700) when missing.
func NewDir(dir string) (*Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("object directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("object directory: %w", err)
	}
	return &Dir{path: abs}, nil
}

// Path returns the directory.
func (d *Dir) Path() string { return d.path }

func (d *Dir) open() (*os.Root, error) {
	r, err := os.OpenRoot(d.path)
	if err != nil {
		return nil, fmt.Errorf("object directory: %w", err)
	}
	return r, nil
}

// Put writes r to a temporary file beside the object, syncs it, and
// renames it into place, then syncs the directory: the object is either
// the old one or the whole new one, also after a crash.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader) (err error) {
	if err := ValidKey(key); err != nil {
		return err
	}
	root, err := d.open()
	if err != nil {
		return err
	}
	defer root.Close()
	parent := path.Dir(key)
	if err := root.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	suffix := make([]byte, 8)
	if _, err := rand.Read(suffix); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	tmp := path.Join(parent, tmpPrefix+path.Base(key)+"-"+hex.EncodeToString(suffix))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	// Writes of 1 MiB, not io.Copy's 32 KiB: a 256 MiB snapshot is 256
	// write calls instead of 8,192.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, ctxReader{ctx, r}, make([]byte, 1<<20)); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := root.Rename(tmp, key); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return syncDir(root, parent)
}

func syncDir(root *os.Root, dir string) error {
	f, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Get opens the object's file.
func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := d.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("get %s: %w (not a regular file)", key, ErrNotFound)
	}
	return f, nil
}

// List walks the directory under the prefix's deepest complete segment.
// Files being written, directories and anything but regular files are
// not objects and are left out.
func (d *Dir) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := validPrefix(prefix); err != nil {
		return nil, err
	}
	root, err := d.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	var objs []Object
	err = fs.WalkDir(root.FS(), start, func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			if name == start && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if name != start && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(name, prefix) || ValidKey(name) != nil {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: name, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// Delete removes the object's file.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := d.open()
	if err != nil {
		return err
	}
	defer root.Close()
	st, err := root.Lstat(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("delete %s: %w: not an object but %s", key, ErrInvalidKey, st.Mode().Type())
	}
	if err := root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}
