package etcdapi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A drill or a restore works in a directory of the worker's own (a
// snapshot opened, a data directory restored: every Secret of the
// cluster in clear). It is removed when the action returns, but a worker
// killed in the middle cannot remove it. So each directory holds a lock
// file, flocked for as long as its action runs, and every new directory
// is made after a sweep of the others: one whose lock nobody holds
// belonged to a worker that died, and is removed.

// scratchPrefix begins the name of every such directory.
const scratchPrefix = "kedge-etcd-"

// scratchLock is the lock file's name inside a directory.
const scratchLock = ".lock"

// lockGrace: a directory without its lock file is left alone this long
// (made an instant before its lock; or by an older worker, which never
// made one).
const lockGrace = 10 * time.Minute

// scratch is one action's directory and the lock it holds.
type scratch struct {
	dir  string
	lock *os.File
}

// newScratch sweeps the directories dead workers left in parent ("":
// $TMPDIR) and makes one (0700) for kind ("drill", "restore"), locked
// until remove.
func newScratch(parent, kind string) (*scratch, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	sweepScratch(parent)
	dir, err := os.MkdirTemp(parent, scratchPrefix+kind+"-")
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, scratchLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &scratch{dir: dir, lock: f}, nil
}

// remove removes the directory, then lets its lock go.
func (s *scratch) remove() {
	_ = os.RemoveAll(s.dir)
	_ = s.lock.Close()
}

// sweepScratch removes parent's scratch directories whose lock nobody
// holds, and those without a lock file older than lockGrace. Errors are
// ignored: what cannot be removed now is tried again by the next action.
func sweepScratch(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), scratchPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		f, err := os.OpenFile(filepath.Join(dir, scratchLock), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > lockGrace {
				_ = os.RemoveAll(dir)
			}
			continue
		}
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		_ = f.Close()
	}
}
