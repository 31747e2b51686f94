package etcdapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/sealstream"

	"kedge.dev/kedge/actions/errtype"
)

// The phases of a drill, as its heartbeat names them.
const (
	phaseFetch   = "fetch"
	phaseRestore = "restore"
	phaseDone    = "done"
)

// DrillProgress is the heartbeat of etcd.restore-drill: its phase and
// the sealed bytes read of the stored object's.
type DrillProgress struct {
	Snapshot string `json:"snapshot"`
	Phase    string `json:"phase"`
	Done     int64  `json:"done"`
	Total    int64  `json:"total"`
}

// drillBeatEvery is how often a drill heartbeats, and recordDrillBeat
// how (variables for tests).
var (
	drillBeatEvery  = 5 * time.Second
	recordDrillBeat = func(ctx context.Context, p DrillProgress) {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, p)
		}
	}
)

// drillProgress heartbeats a drill's progress on a ticker, so the phases
// that read nothing (etcd's restore, its start) heartbeat too.
type drillProgress struct {
	ctx      context.Context
	snapshot string
	total    int64
	done     atomic.Int64
	phase    atomic.Value // string
	quit     chan struct{}
	wg       sync.WaitGroup
}

func startDrillProgress(ctx context.Context, snapshot string, total int64) *drillProgress {
	p := &drillProgress{ctx: ctx, snapshot: snapshot, total: total, quit: make(chan struct{})}
	p.phase.Store(phaseFetch)
	p.beat()
	p.wg.Go(func() {
		t := time.NewTicker(drillBeatEvery)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p.beat()
			}
		}
	})
	return p
}

func (p *drillProgress) beat() {
	recordDrillBeat(p.ctx, DrillProgress{Snapshot: p.snapshot, Phase: p.phase.Load().(string), Done: p.done.Load(), Total: p.total})
}

func (p *drillProgress) setPhase(phase string) { p.phase.Store(phase) }

// stop ends the ticker; the last heartbeat says where the drill got to.
func (p *drillProgress) stop() {
	close(p.quit)
	p.wg.Wait()
	p.beat()
}

// progressReader counts what is read into the progress.
type progressReader struct {
	r io.Reader
	p *drillProgress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.done.Add(int64(n))
	return n, err
}

// fetchSnapshot streams the sealed snapshot from the store through
// sealstream's Reader into a new file at path (0600), one chunk at a
// time, and checks what it wrote: the seal authenticated to its end with
// the key the manifest names, the manifest's size and sha256, and etcd's
// own trailing sha256 of the bytes before it. It writes no more than the
// manifest's size.
func (a *Activities) fetchSnapshot(ctx context.Context, store objstore.Store, snap storedSnapshot, m etcd.Manifest, path string, prog *drillProgress) error {
	key := snap.name.key
	rc, err := store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the snapshot %s is gone from the destination", key), errtype.EtcdDrillFailed, err)
	}
	if err != nil {
		return storeError("read "+key, err)
	}
	defer rc.Close()
	sr, err := sealstream.NewReader(progressReader{r: rc, p: prog}, a.Keys)
	if err != nil {
		return sealError(key, err)
	}
	if m.KeyID != "" && sr.KeyID() != m.KeyID {
		return invalidSnapshot(key, fmt.Sprintf("it is sealed with key %q, its manifest says %q", sr.KeyID(), m.KeyID))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("a file for the snapshot: %v", err), errtype.EtcdDrillFailed, err)
	}
	defer f.Close()
	whole := sha256.New()
	body := &trailer{h: sha256.New()}
	out := &fileSink{f: f, whole: whole, body: body}
	n, err := io.Copy(out, io.LimitReader(sr, m.Size+1))
	switch {
	case out.err != nil:
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("write the snapshot to %s: %v", path, out.err), errtype.EtcdDrillFailed, out.err)
	case err != nil:
		return sealError(key, err)
	case n > m.Size:
		return invalidSnapshot(key, fmt.Sprintf("it holds more than the %d bytes its manifest records", m.Size))
	}
	if _, err := io.Copy(io.Discard, sr); err != nil { // the seal's end: io.EOF only once the last chunk authenticated
		return sealError(key, err)
	}
	if err := f.Close(); err != nil {
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("write the snapshot to %s: %v", path, err), errtype.EtcdDrillFailed, err)
	}
	switch {
	case n != m.Size:
		return invalidSnapshot(key, fmt.Sprintf("it holds %d bytes, its manifest records %d", n, m.Size))
	case hex.EncodeToString(whole.Sum(nil)) != m.SHA256:
		return invalidSnapshot(key, "its sha256 is not the one its manifest records")
	case !body.matches():
		return invalidSnapshot(key, "etcd's trailing sha256 does not match the bytes before it")
	}
	return nil
}

// fileSink writes to the file and both hashes; it keeps the file's
// error apart from the seal's.
type fileSink struct {
	f     *os.File
	whole io.Writer
	body  *trailer
	err   error
}

func (s *fileSink) Write(p []byte) (int, error) {
	if _, err := s.f.Write(p); err != nil {
		s.err = err
		return 0, err
	}
	s.whole.Write(p)
	s.body.Write(p)
	return len(p), nil
}

func invalidSnapshot(key, why string) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the snapshot %s is not restored: %s", key, why), errtype.EtcdSnapshotInvalid, nil)
}

// sealError classifies a failure to open the sealed stream: the seal's
// own refusals are not retried; anything else came from the store.
func sealError(key string, err error) error {
	for _, e := range []error{sealstream.ErrNotSealed, sealstream.ErrUnknownKey, sealstream.ErrTampered, sealstream.ErrTruncated, sealstream.ErrTrailingData} {
		if errors.Is(err, e) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the snapshot %s is not restored: %v", key, err), errtype.EtcdSnapshotInvalid, err)
		}
	}
	return storeError("read "+key, err)
}
