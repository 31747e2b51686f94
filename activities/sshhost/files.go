package sshhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pkg/sftp"

	"kedge.dev/kedge/activities/sshpool"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
)

const (
	defaultReadLimit = 1 << 20
	// maxCompareSize bounds the previous content write-file reads to
	// compare and back up.
	maxCompareSize = 64 << 20
	// DefaultBackupDir is where host.write-file keeps previous contents.
	DefaultBackupDir = "/var/lib/kedge/backup"
)

// WriteFile writes a file atomically (host.write-file).
func (a *Activities) WriteFile(ctx context.Context, in host.WriteFileInput) (host.WriteFileResult, error) {
	res, err := a.writeFile(ctx, in)
	return res, toTemporal(err)
}

// remoteFile is a file as read over SFTP.
type remoteFile struct {
	data     []byte
	mode     uint32 // permission bits, 07777
	uid, gid uint32
	ids      bool // uid/gid known
}

func (a *Activities) writeFile(ctx context.Context, in host.WriteFileInput) (host.WriteFileResult, error) {
	if err := checkPath(in.Path); err != nil {
		return host.WriteFileResult{}, err
	}
	content, err := inputContent(in.Content, in.ContentBase64)
	if err != nil {
		return host.WriteFileResult{}, err
	}
	mode, err := parseMode(in.Mode)
	if err != nil {
		return host.WriteFileResult{}, err
	}
	// The content's sha256 is only reported: it is hashed while the
	// content travels, not before (256 MiB take 0.15 s or more).
	sum := make(chan string, 1)
	go func() { sum <- sha(content) }()
	res, err := a.writeContent(ctx, in, content, mode)
	res.SHA256 = <-sum
	return res, err
}

// writeContent is writeFile once the input is checked: it reads what is
// there, keeps a backup of it, and writes content over it unless it is
// the same.
func (a *Activities) writeContent(ctx context.Context, in host.WriteFileInput, content []byte, mode uint32) (host.WriteFileResult, error) {
	t := in.Target
	var res host.WriteFileResult

	// Each phase is safe to repeat, so a connection that dies in one is
	// redialled and the phase rerun without redoing the others.
	var prev *remoteFile
	err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) (err error) {
		prev, err = readIfExists(c, in.Path, maxCompareSize)
		return err
	})
	if err != nil {
		return res, a.fileErr(t, "read", in.Path, err)
	}
	if prev != nil {
		res.Existed, res.PreviousSHA256 = true, sha(prev.data)
		if bytes.Equal(prev.data, content) && prev.mode == mode {
			return res, nil
		}
		if !in.NoBackup {
			backup := path.Join(a.backupDir(), backupName(in.Path, res.PreviousSHA256))
			if err := ctx.Err(); err != nil {
				return res, err
			}
			err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
				return atomicWrite(c, backup, prev.data, prev.mode, prev, 0o700)
			})
			if err != nil {
				return res, a.fileErr(t, "keep a backup of", in.Path, err)
			}
			res.Backup = backup
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	err = a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		return atomicWrite(c, in.Path, content, mode, prev, 0)
	})
	if err != nil {
		return res, a.fileErr(t, "write", in.Path, err)
	}
	res.Changed = true
	return res, nil
}

// RestoreFile undoes a host.write-file (host.restore-file).
func (a *Activities) RestoreFile(ctx context.Context, in host.RestoreFileInput) (host.RestoreFileResult, error) {
	res, err := a.restoreFile(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) restoreFile(ctx context.Context, in host.RestoreFileInput) (host.RestoreFileResult, error) {
	if err := checkPath(in.Path); err != nil {
		return host.RestoreFileResult{}, err
	}
	if in.Changed != nil && !*in.Changed {
		return host.RestoreFileResult{}, nil
	}
	t := in.Target
	if in.Backup != "" {
		if err := a.checkBackup(in.Backup); err != nil {
			return host.RestoreFileResult{}, err
		}
		var backup *remoteFile
		err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) (err error) {
			backup, err = readIfExists(c, in.Backup, maxCompareSize)
			return err
		})
		if err != nil {
			return host.RestoreFileResult{}, a.fileErr(t, "read backup", in.Backup, err)
		}
		if backup == nil {
			return host.RestoreFileResult{}, &typedError{typ: errtype.FileNotFound, nonRetryable: true,
				msg: fmt.Sprintf("backup %s of %s is gone from %s", in.Backup, in.Path, t.Name())}
		}
		if err := ctx.Err(); err != nil {
			return host.RestoreFileResult{}, err
		}
		err = a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
			return atomicWrite(c, in.Path, backup.data, backup.mode, backup, 0)
		})
		if err != nil {
			return host.RestoreFileResult{}, a.fileErr(t, "restore", in.Path, err)
		}
		return host.RestoreFileResult{Restored: true}, nil
	}
	if in.Existed {
		return host.RestoreFileResult{}, invalid(fmt.Sprintf("%s existed before the write but no backup was kept (noBackup): nothing to restore from", in.Path))
	}
	err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		if err := c.Remove(in.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return host.RestoreFileResult{}, a.fileErr(t, "remove", in.Path, err)
	}
	return host.RestoreFileResult{Removed: true}, nil
}

// ReadFile reads a file (host.read-file).
func (a *Activities) ReadFile(ctx context.Context, in host.ReadFileInput) (host.ReadFileResult, error) {
	res, err := a.readFile(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) readFile(ctx context.Context, in host.ReadFileInput) (host.ReadFileResult, error) {
	if climbs(in.Path) {
		return host.ReadFileResult{}, climbsError("path", in.Path)
	}
	if !path.IsAbs(in.Path) {
		return host.ReadFileResult{}, invalid(fmt.Sprintf("path %q must be absolute", in.Path))
	}
	if in.Missing != "" && in.Missing != "error" && in.Missing != "empty" {
		return host.ReadFileResult{}, invalid(fmt.Sprintf("missing must be error or empty, got %q", in.Missing))
	}
	limit := int64(in.MaxBytes)
	if limit <= 0 {
		limit = defaultReadLimit
	}
	t := in.Target
	var f *remoteFile
	err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) (err error) {
		f, err = readIfExists(c, in.Path, limit)
		return err
	})
	var big *tooBigError
	if errors.As(err, &big) {
		return host.ReadFileResult{}, invalid(fmt.Sprintf("%s on %s is %d bytes, over maxBytes %d", in.Path, t.Name(), big.size, limit))
	}
	if err != nil {
		return host.ReadFileResult{}, a.fileErr(t, "read", in.Path, err)
	}
	if f == nil {
		if in.Missing == "empty" {
			return host.ReadFileResult{}, nil
		}
		return host.ReadFileResult{}, &typedError{typ: errtype.FileNotFound, nonRetryable: true, msg: fmt.Sprintf("%s does not exist on %s", in.Path, t.Name())}
	}
	res := host.ReadFileResult{Exists: true, SHA256: sha(f.data), Mode: fmt.Sprintf("%04o", f.mode), Size: int64(len(f.data))}
	if utf8.Valid(f.data) {
		res.Content = string(f.data)
	} else {
		res.ContentBase64 = base64.StdEncoding.EncodeToString(f.data)
	}
	return res, nil
}

// checkPath refuses a path to write, restore or inspect that is not
// absolute and clean, or that climbs with "..".
func checkPath(p string) error {
	if climbs(p) {
		return climbsError("path", p)
	}
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return invalid(fmt.Sprintf("path %q must be absolute and clean", p))
	}
	return nil
}

// climbs says whether a path has a ".." component, as given or once
// cleaned: a path a run gives names the file itself, never a way up
// from another directory (a check on the prefix of such a path means
// nothing).
func climbs(p string) bool {
	for _, q := range []string{p, path.Clean(p)} {
		if slices.Contains(strings.Split(q, "/"), "..") {
			return true
		}
	}
	return false
}

func climbsError(field, p string) error {
	return invalid(fmt.Sprintf("%s %q climbs with \"..\": name the file itself", field, p))
}

// checkBackup refuses a backup to restore from that is not one
// host.write-file keeps: a file directly in the backup directory.
func (a *Activities) checkBackup(b string) error {
	if climbs(b) {
		return climbsError("backup", b)
	}
	if !path.IsAbs(b) || path.Clean(b) != b || path.Dir(b) != a.backupDir() {
		return invalid(fmt.Sprintf("backup %q is not a backup host.write-file keeps (a file in %s)", b, a.backupDir()))
	}
	return nil
}

// fileErr classifies an SFTP failure once.
func (a *Activities) fileErr(t target.SSH, op, p string, err error) error {
	var te *typedError
	switch {
	case errors.As(err, &te), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, sshpool.ErrConnectionLost), errors.Is(err, sshpool.ErrUnreachable), errors.Is(err, sshpool.ErrConfig), errors.Is(err, sshpool.ErrPrivilege),
		errors.Is(err, sshpool.ErrAuthFailed), errors.Is(err, sshpool.ErrHostKeyMismatch), errors.Is(err, sshpool.ErrHostUnknown):
		return err
	case sshpool.IsTransportError(err):
		return a.Pool.Lost(t, fmt.Errorf("%s %s: %w", op, p, err))
	case errors.Is(err, fs.ErrNotExist):
		return &typedError{typ: errtype.FileNotFound, nonRetryable: true, msg: fmt.Sprintf("%s %s on %s: %v", op, p, t.Name(), err)}
	}
	return &typedError{typ: errtype.FileOperationFailed, msg: fmt.Sprintf("%s %s on %s: %v", op, p, t.Name(), err)}
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

// parseMode reads octal permission bits ("0644", "644", "0o644", "4755").
func parseMode(s string) (uint32, error) {
	if s == "" {
		return 0o644, nil
	}
	m, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O"), 8, 32)
	if err != nil || m > 0o7777 {
		return 0, invalid(fmt.Sprintf("mode %q is not an octal mode such as 0644", s))
	}
	return uint32(m), nil
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// backupName is a flat file name for the version of p whose sha256 is sum:
// the path with "/" as "_" (and "_" as "__", so distinct paths never
// collide), then the first 16 hex digits of sum.
func backupName(p, sum string) string {
	flat := strings.ReplaceAll(strings.TrimPrefix(p, "/"), "_", "__")
	return strings.ReplaceAll(flat, "/", "_") + "." + sum[:16]
}

type tooBigError struct{ size int64 }

func (e *tooBigError) Error() string { return fmt.Sprintf("file is %d bytes, too big", e.size) }

// unixMode is the permission bits (with setuid, setgid, sticky) of fi.
func unixMode(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		return st.Mode & 0o7777
	}
	m := uint32(fi.Mode().Perm())
	if fi.Mode()&os.ModeSetuid != 0 {
		m |= 0o4000
	}
	if fi.Mode()&os.ModeSetgid != 0 {
		m |= 0o2000
	}
	if fi.Mode()&os.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

// readIfExists reads a regular file; a missing file gives nil and no
// error.
func readIfExists(c *sftp.Client, p string, limit int64) (*remoteFile, error) {
	f, err := c.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, &tooBigError{fi.Size()}
	}
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()))
	n, err := io.Copy(&buf, io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, &tooBigError{n}
	}
	rf := &remoteFile{data: buf.Bytes(), mode: unixMode(fi)}
	if rf.data == nil {
		rf.data = []byte{}
	}
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		rf.uid, rf.gid, rf.ids = st.UID, st.GID, true
	}
	return rf, nil
}

// atomicWrite writes data to a temporary file next to p, sets its mode
// (and the owner of like, when known and different), syncs it and renames
// it over p, so readers see the old or the new file, never a part. A
// missing parent directory is created (with dirMode when not 0).
func atomicWrite(c *sftp.Client, p string, data []byte, mode uint32, like *remoteFile, dirMode os.FileMode) error {
	dir := path.Dir(p)
	tmp := path.Join(dir, "."+path.Base(p)+".kedge-"+randomHex(6))
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := c.OpenFile(tmp, flags)
	if errors.Is(err, fs.ErrNotExist) {
		if err := c.MkdirAll(dir); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		if dirMode != 0 {
			if err := c.Chmod(dir, dirMode); err != nil {
				return fmt.Errorf("chmod %s: %w", dir, err)
			}
		}
		f, err = c.OpenFile(tmp, flags)
	}
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = c.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(os.FileMode(mode)); err != nil {
		return err
	}
	if like != nil && like.ids {
		// Keep the owner of the file being replaced. Best effort: a
		// non-root user cannot give files away, and that is no reason
		// to fail the write.
		if fi, err := f.Stat(); err == nil {
			if st, isStat := fi.Sys().(*sftp.FileStat); isStat && (st.UID != like.uid || st.GID != like.gid) {
				_ = f.Chown(int(like.uid), int(like.gid))
			}
		}
	}
	if err := f.Sync(); err != nil && !isUnsupported(err) {
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

func isUnsupported(err error) bool {
	var se *sftp.StatusError
	return errors.Is(err, sftp.ErrSSHFxOpUnsupported) || errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxOpUnsupported
}
