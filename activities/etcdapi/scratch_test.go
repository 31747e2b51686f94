package etcdapi

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A worker killed in a restore leaves its directory (the cluster's data
// in clear) behind; the next drill or restore on that machine removes it,
// and leaves alone what a live action still uses.
func TestAScratchDirectoryADeadWorkerLeftIsRemoved(t *testing.T) {
	parent := t.TempDir()
	mk := func(name string, lock bool, age time.Duration) string {
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(dir, "data", "member"), 0o700); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(dir, scratchLock), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		then := time.Now().Add(-age)
		if err := os.Chtimes(dir, then, then); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dead := mk("kedge-etcd-restore-1", true, 0)           // its worker was killed: lock free
	live := mk("kedge-etcd-restore-2", true, 0)           // a running restore holds its lock
	old := mk("kedge-etcd-restore-3", false, time.Hour)   // an older worker's, never locked
	young := mk("kedge-etcd-drill-4", false, time.Second) // made an instant before its lock
	other := mk("somebody-elses", true, 0)                // not Kedge's
	held, err := os.OpenFile(filepath.Join(live, scratchLock), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	s, err := newScratch(parent, "restore")
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{dead: false, live: true, old: false, young: true, other: true, s.dir: true} {
		_, err := os.Stat(dir)
		if got := err == nil; got != want {
			t.Errorf("%s: there %v, want %v", filepath.Base(dir), got, want)
		}
	}
	// Its own lock is held: a second sweep leaves it.
	sweepScratch(parent)
	if _, err := os.Stat(s.dir); err != nil {
		t.Fatalf("a live action's directory was swept: %v", err)
	}
	if info, err := os.Stat(s.dir); err == nil && info.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", info.Mode().Perm())
	}
	s.remove()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("removed directory: %v", err)
	}
}
