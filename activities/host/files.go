package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pkg/sftp"
)

const (
	defaultReadLimit = 1 << 20
	maxCompareSize   = 64 << 20
)

// WriteFile writes a file atomically (host.write-file).
func (a *Activities) WriteFile(ctx context.Context, in WriteFileInput) (WriteFileResult, error) {
	res, err := a.writeFile(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) writeFile(ctx context.Context, in WriteFileInput) (WriteFileResult, error) {
	if !path.IsAbs(in.Path) || path.Clean(in.Path) != in.Path {
		return WriteFileResult{}, invalid(fmt.Sprintf("path %q must be absolute and clean", in.Path))
	}
	content, err := inputContent(in.Content, in.ContentBase64)
	if err != nil {
		return WriteFileResult{}, err
	}
	mode, err := parseMode(in.Mode)
	if err != nil {
		return WriteFileResult{}, err
	}
	c, err := a.Pool.SFTP(ctx, in.Target)
	if err != nil {
		return WriteFileResult{}, err
	}
	sum := sha(content)
	res := WriteFileResult{SHA256: sum}
	prev, prevMode, err := readIfExists(c, in.Path, maxCompareSize)
	if err != nil {
		return res, a.Pool.Lost(in.Target, err)
	}
	if prev != nil {
		res.Existed, res.PreviousSHA256 = true, sha(prev)
		if res.PreviousSHA256 == sum && prevMode == mode {
			return res, nil
		}
		if !in.NoBackup {
			res.Backup = path.Join(a.backupDir(), backupName(in.Path, res.PreviousSHA256))
			if err := atomicWrite(c, res.Backup, prev, prevMode); err != nil {
				return res, a.Pool.Lost(in.Target, fmt.Errorf("keep backup of %s on %s: %w", in.Path, in.Target.Node, err))
			}
		}
	}
	if err := atomicWrite(c, in.Path, content, mode); err != nil {
		return res, a.Pool.Lost(in.Target, fmt.Errorf("write %s on %s: %w", in.Path, in.Target.Node, err))
	}
	res.Changed = true
	return res, nil
}

// RestoreFile undoes a host.write-file (host.restore-file).
func (a *Activities) RestoreFile(ctx context.Context, in RestoreFileInput) (RestoreFileResult, error) {
	res, err := a.restoreFile(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) restoreFile(ctx context.Context, in RestoreFileInput) (RestoreFileResult, error) {
	if !path.IsAbs(in.Path) {
		return RestoreFileResult{}, invalid(fmt.Sprintf("path %q must be absolute", in.Path))
	}
	if in.Changed != nil && !*in.Changed {
		return RestoreFileResult{}, nil
	}
	c, err := a.Pool.SFTP(ctx, in.Target)
	if err != nil {
		return RestoreFileResult{}, err
	}
	if in.Backup != "" {
		data, mode, err := readIfExists(c, in.Backup, maxCompareSize)
		if err != nil {
			return RestoreFileResult{}, a.Pool.Lost(in.Target, err)
		}
		if data == nil {
			return RestoreFileResult{}, &typedError{typ: ErrTypeFileNotFound, nonRetryable: true,
				msg: fmt.Sprintf("backup %s of %s is gone from %s", in.Backup, in.Path, in.Target.Node)}
		}
		if err := atomicWrite(c, in.Path, data, mode); err != nil {
			return RestoreFileResult{}, a.Pool.Lost(in.Target, fmt.Errorf("restore %s on %s: %w", in.Path, in.Target.Node, err))
		}
		return RestoreFileResult{Restored: true}, nil
	}
	if in.Existed {
		return RestoreFileResult{}, invalid(fmt.Sprintf("%s existed before the write but no backup was kept: nothing to restore from", in.Path))
	}
	if err := c.Remove(in.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return RestoreFileResult{}, a.Pool.Lost(in.Target, fmt.Errorf("remove %s on %s: %w", in.Path, in.Target.Node, err))
	}
	return RestoreFileResult{Removed: true}, nil
}

// ReadFile reads a file (host.read-file).
func (a *Activities) ReadFile(ctx context.Context, in ReadFileInput) (ReadFileResult, error) {
	res, err := a.readFile(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) readFile(ctx context.Context, in ReadFileInput) (ReadFileResult, error) {
	if !path.IsAbs(in.Path) {
		return ReadFileResult{}, invalid(fmt.Sprintf("path %q must be absolute", in.Path))
	}
	if in.Missing != "" && in.Missing != "error" && in.Missing != "empty" {
		return ReadFileResult{}, invalid(fmt.Sprintf("missing must be error or empty, got %q", in.Missing))
	}
	limit := int64(in.MaxBytes)
	if limit <= 0 {
		limit = defaultReadLimit
	}
	c, err := a.Pool.SFTP(ctx, in.Target)
	if err != nil {
		return ReadFileResult{}, err
	}
	fi, err := c.Stat(in.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if in.Missing == "empty" {
			return ReadFileResult{}, nil
		}
		return ReadFileResult{}, &typedError{typ: ErrTypeFileNotFound, nonRetryable: true, msg: fmt.Sprintf("%s does not exist on %s", in.Path, in.Target.Node)}
	}
	if err != nil {
		return ReadFileResult{}, a.Pool.Lost(in.Target, err)
	}
	if fi.Size() > limit {
		return ReadFileResult{}, invalid(fmt.Sprintf("%s on %s is %d bytes, over maxBytes %d", in.Path, in.Target.Node, fi.Size(), limit))
	}
	data, _, err := readIfExists(c, in.Path, limit)
	if err != nil {
		return ReadFileResult{}, a.Pool.Lost(in.Target, err)
	}
	res := ReadFileResult{Exists: true, SHA256: sha(data), Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), Size: int64(len(data))}
	if utf8.Valid(data) {
		res.Content = string(data)
	} else {
		res.ContentBase64 = base64.StdEncoding.EncodeToString(data)
	}
	return res, nil
}

func inputContent(text, b64 string) ([]byte, error) {
	switch {
	case text != "" && b64 != "":
		return nil, invalid("give content or contentBase64, not both")
	case b64 != "":
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, invalid(fmt.Sprintf("contentBase64: %v", err))
		}
		return data, nil
	}
	return []byte(text), nil
}

func parseMode(s string) (os.FileMode, error) {
	if s == "" {
		return 0o644, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, invalid(fmt.Sprintf("mode %q is not an octal mode such as 0644", s))
	}
	return os.FileMode(m), nil
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// backupName is a flat, unique file name for a previous version of p.
func backupName(p, sum string) string {
	return strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_") + "." + sum[:16]
}

// readIfExists reads a file; a missing file gives nil data and no error.
func readIfExists(c *sftp.Client, p string, limit int64) ([]byte, os.FileMode, error) {
	f, err := c.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if fi.Size() > limit {
		return nil, 0, fmt.Errorf("%s is %d bytes, more than %d", p, fi.Size(), limit)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(f, limit+1)); err != nil {
		return nil, 0, err
	}
	data := buf.Bytes()
	if data == nil {
		data = []byte{}
	}
	return data, fi.Mode().Perm(), nil
}

// atomicWrite writes data to a temporary file next to p, syncs it, sets
// its mode and renames it over p, so readers see the old or the new file,
// never a part.
func atomicWrite(c *sftp.Client, p string, data []byte, mode os.FileMode) error {
	dir := path.Dir(p)
	if err := c.MkdirAll(dir); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := path.Join(dir, "."+path.Base(p)+".kedge-"+hex.EncodeToString(b))
	f, err := c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = c.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil && !errors.Is(err, sftp.ErrSSHFxOpUnsupported) {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := c.PosixRename(tmp, p); err != nil {
		return err
	}
	ok = true
	return nil
}
