package integration

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"kedge.dev/kedge/integration/s3lab"
	"kedge.dev/kedge/internal/objstore"
)

// randomStream yields n pseudo-random bytes and hashes them as they pass;
// it is a plain io.Reader, so nothing can learn its size in advance.
type randomStream struct {
	rng  *rand.ChaCha8
	left int64
	sum  hash.Hash
	// after, when set, is called once when that many bytes have passed.
	after   int64
	afterFn func()
}

func newRandomStream(n int64, seed byte) *randomStream {
	var s [32]byte
	s[0] = seed
	return &randomStream{rng: rand.NewChaCha8(s), left: n, sum: sha256.New()}
}

func (r *randomStream) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, _ := r.rng.Read(p)
	r.sum.Write(p[:n])
	r.left -= int64(n)
	if r.afterFn != nil {
		if r.after -= int64(n); r.after <= 0 {
			r.afterFn()
			r.afterFn = nil
		}
	}
	return n, nil
}

func s3Store(t *testing.T, s *s3lab.Server, secret string) *objstore.S3 {
	t.Helper()
	st, err := objstore.NewS3(objstore.S3Config{Endpoint: s.Endpoint, Bucket: s.Bucket, Region: s.Region,
		AccessKey: s.AccessKey, SecretKey: secret, PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestObjectStoreS3 round-trips a 20 MiB object of unknown size through a
// real S3-compatible server (SeaweedFS) in parts, and checks that a wrong
// secret is refused and a cancelled upload leaves nothing.
func TestObjectStoreS3(t *testing.T) {
	mainLane.join(t)
	began := time.Now()
	srv := s3lab.StartT(t, s3lab.Options{})
	t.Logf("s3 server at %s ready in %v", srv.Endpoint, time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := s3Store(t, srv, srv.SecretKey)
	if err := st.Check(ctx); err != nil {
		t.Fatalf("check: %v", err)
	}
	if objs, err := st.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Fatalf("a new bucket holds %+v (%v)", objs, err)
	}

	const size = 20 << 20
	const key = "lab/etcd/snapshot-1.db.sealed"
	src := newRandomStream(size, 1)
	began = time.Now()
	if err := st.Put(ctx, key, src); err != nil {
		t.Fatalf("put: %v", err)
	}
	t.Logf("put %d MiB in %v", size>>20, time.Since(began).Round(time.Millisecond))
	if src.left != 0 {
		t.Fatalf("put returned with %d bytes unread", src.left)
	}

	objs, err := st.List(ctx, "lab/etcd/")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(objs) != 1 || objs[0].Key != key || objs[0].Size != size {
		t.Fatalf("list: %+v, want %s of %d bytes", objs, key, size)
	}
	if age := time.Since(objs[0].Modified); age < -time.Minute || age > 5*time.Minute {
		t.Errorf("modified %v", objs[0].Modified)
	}
	if other, err := st.List(ctx, "other/"); err != nil || len(other) != 0 {
		t.Errorf("list of another prefix: %v, %v", other, err)
	}

	rc, err := st.Get(ctx, key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || n != size {
		t.Fatalf("get: read %d bytes: %v", n, err)
	}
	if got, want := h.Sum(nil), src.sum.Sum(nil); string(got) != string(want) {
		t.Fatalf("sha256 of what came back %x, of what was put %x", got, want)
	}

	t.Run("wrong secret refused", func(t *testing.T) {
		bad := s3Store(t, srv, srv.SecretKey+"x")
		if err := bad.Put(ctx, "lab/etcd/planted", newRandomStream(1<<20, 2)); !errors.Is(err, objstore.ErrDenied) {
			t.Errorf("put with a wrong secret: %v, want ErrDenied", err)
		}
		if _, err := bad.List(ctx, ""); !errors.Is(err, objstore.ErrDenied) {
			t.Errorf("list with a wrong secret: %v, want ErrDenied", err)
		}
		if _, err := bad.Get(ctx, key); !errors.Is(err, objstore.ErrDenied) {
			t.Errorf("get with a wrong secret: %v, want ErrDenied", err)
		}
		if err := bad.Delete(ctx, key); !errors.Is(err, objstore.ErrDenied) {
			t.Errorf("delete with a wrong secret: %v, want ErrDenied", err)
		}
		if err := bad.Check(ctx); !errors.Is(err, objstore.ErrDenied) {
			t.Errorf("check with a wrong secret: %v, want ErrDenied", err)
		}
	})

	t.Run("cancelled put leaves nothing", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		defer ccancel()
		src := newRandomStream(size, 3)
		src.after, src.afterFn = 12<<20, ccancel // inside the third part
		if err := st.Put(cctx, "lab/etcd/cancelled", src); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled put: %v", err)
		}
	})

	objs, err = st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != key {
		t.Errorf("after the refused and cancelled puts: %+v", objs)
	}

	if err := st.Delete(ctx, key); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Errorf("a second delete: %v", err)
	}
	if _, err := st.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if objs, err := st.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Errorf("list after delete: %+v, %v", objs, err)
	}
	if _, err := st.Get(ctx, "../x"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("get ../x: %v, want ErrInvalidKey", err)
	}

	// The server leaves nothing on the machine (glog's files in /tmp).
	pid := srv.Pid()
	srv.Stop()
	if left, _ := filepath.Glob(fmt.Sprintf("/tmp/weed.*.%d", pid)); len(left) > 0 {
		t.Errorf("left by the server: %v", left)
	}
}
