package sshhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"

	"github.com/pkg/sftp"
	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/internal/resume"

	"kedge.dev/kedge/actions/target"
)

// bundleProgress is host.install-bundle's heartbeat: which bundle (its
// SHA-256) and how many of its bytes are on the host. An attempt after a
// lost worker goes on from there once the host shows it has them.
type bundleProgress struct {
	Bundle   string `json:"bundle"`
	Uploaded int64  `json:"uploaded"`
	Files    int    `json:"files"`
}

// uploadChunk is how much of a bundle is written between heartbeats.
var uploadChunk = 256 << 10

// uploadWrote, set by tests, is told each range of a bundle written to a
// host (heartbeats are throttled: they cannot show every write).
var uploadWrote func(off, end int64)

// uploadBundle puts archive at bundle on the host, through bundle.part,
// heartbeating how much is written. What a lost attempt wrote is kept
// when the host's copy hashes the same.
func (a *Activities) uploadBundle(ctx context.Context, t target.SSH, bundle string, archive []byte, prog bundleProgress) error {
	part := bundle + ".part"
	from := a.uploadedBefore(ctx, t, bundle, part, archive, prog.Bundle)
	if from == int64(len(archive)) {
		return nil
	}
	return a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		flags := os.O_WRONLY | os.O_CREATE
		if from == 0 {
			flags |= os.O_TRUNC
		}
		f, err := c.OpenFile(part, flags)
		if errors.Is(err, fs.ErrNotExist) {
			if err := c.MkdirAll(path.Dir(part)); err != nil {
				return fmt.Errorf("create %s: %w", path.Dir(part), err)
			}
			if err := c.Chmod(path.Dir(part), 0o700); err != nil {
				return fmt.Errorf("chmod %s: %w", path.Dir(part), err)
			}
			f, err = c.OpenFile(part, flags)
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Chmod(0o600); err != nil {
			return err
		}
		if err := f.Truncate(from); err != nil {
			return err
		}
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return err
		}
		for off := from; off < int64(len(archive)); {
			end := min(off+int64(uploadChunk), int64(len(archive)))
			if _, err := f.Write(archive[off:end]); err != nil {
				return err
			}
			if uploadWrote != nil {
				uploadWrote(off, end)
			}
			off = end
			if activity.IsActivity(ctx) {
				prog.Uploaded = off
				activity.RecordHeartbeat(ctx, prog)
			}
		}
		if err := f.Sync(); err != nil && !isUnsupported(err) {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return c.PosixRename(part, bundle)
	})
}

// uploadedBefore is how much of archive a lost attempt left on the host
// that the host shows is the same: all of it when bundle hashes as the
// archive, the prefix the attempt heartbeated when part's first bytes
// hash as the archive's, else nothing.
func (a *Activities) uploadedBefore(ctx context.Context, t target.SSH, bundle, part string, archive []byte, sum string) int64 {
	var p bundleProgress
	if !resume.Load(ctx, &p) || p.Bundle != sum || p.Uploaded <= 0 || p.Uploaded > int64(len(archive)) {
		return 0
	}
	n := strconv.FormatInt(p.Uploaded, 10)
	script := "set -u\nB=" + quote(bundle) + "\nP=" + quote(part) + "\n" +
		`if [ -f "$B" ] && [ "$(wc -c <"$B")" -eq ` + strconv.Itoa(len(archive)) + ` ]; then echo "whole=$(sha256sum <"$B" | cut -d' ' -f1)" >>"$KEDGE_OUTPUT"; fi` + "\n" +
		`if [ -f "$P" ] && [ "$(wc -c <"$P")" -ge ` + n + ` ]; then echo "prefix=$(head -c ` + n + ` "$P" | sha256sum | cut -d' ' -f1)" >>"$KEDGE_OUTPUT"; fi` + "\n"
	out, err := a.exec(ctx, t, execSpec{script: script, timeout: bundleTimeout, limit: 1 << 12,
		details: func(_, _ *tailBuffer) any { return p }})
	switch {
	case err != nil || out.ExitCode != 0:
		return 0
	case out.Outputs["whole"] == sum:
		return int64(len(archive))
	case out.Outputs["prefix"] == sha(archive[:p.Uploaded]):
		return p.Uploaded
	}
	return 0
}
