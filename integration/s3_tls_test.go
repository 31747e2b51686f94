package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/integration/s3lab"
	"kedge.dev/kedge/internal/objstore"
)

// tlsStore is the store Kedge opens for an https:// destination (the
// etcd activities' openStore): Secure, since the endpoint is not http://
// (insecure or not), verified with the destination's caFile when it names
// one (roots), the system's roots otherwise (nil).
func tlsStore(t *testing.T, s *s3lab.Server, endpoint string, roots *x509.CertPool) *objstore.S3 {
	t.Helper()
	st, err := objstore.NewS3(objstore.S3Config{Endpoint: endpoint, Bucket: s.Bucket, Region: s.Region, Secure: true,
		RootCAs: roots, AccessKey: s.AccessKey, SecretKey: s.SecretKey, PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// wantUnknownAuthority fails unless err is the TLS verification's refusal
// of a certificate signed by a CA the client does not trust.
func wantUnknownAuthority(t *testing.T, what string, err error) {
	t.Helper()
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) {
		t.Errorf("%s: %v, want a certificate signed by an unknown authority", what, err)
	}
}

// TestObjectStoreS3TLS puts and gets a snapshot-sized object through the
// test world's S3 server over HTTPS, its certificate signed by a CA made
// for the test: trusted (the destination's caFile), it round-trips;
// untrusted (no caFile, so the system's roots; insecure changes nothing
// for an https:// endpoint), and to a man in the middle holding a
// certificate of his own CA, every request is refused at the handshake
// with an x509 error, and nothing is written or received.
func TestObjectStoreS3TLS(t *testing.T) {
	mainLane.join(t)
	began := time.Now()
	srv := s3lab.StartT(t, s3lab.Options{TLS: true})
	t.Logf("s3 server at %s ready in %v", srv.URL(), time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The destination as an inventory gives it, checked as Kedge checks
	// it: https with a caFile, and https with insecure, both taken.
	for _, insecure := range []bool{false, true} {
		d := etcd.Destination{Kind: etcd.DestinationS3, Endpoint: srv.URL(), Bucket: srv.Bucket, Region: srv.Region,
			CredentialsFile: "/etc/kedge/s3.credentials", CAFile: srv.CAFile, Insecure: insecure}
		if err := d.Check(); err != nil {
			t.Fatalf("destination (insecure %v): %v", insecure, err)
		}
		if host, err := d.EndpointHost(); err != nil || host != srv.Endpoint {
			t.Fatalf("endpoint host %q %v, want %s", host, err, srv.Endpoint)
		}
	}
	caPEM, err := os.ReadFile(srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", srv.CAFile)
	}

	const size = 6 << 20
	const key = "lab/etcd/tls-1.snap.kseal"
	t.Run("trusted CA round-trips", func(t *testing.T) {
		st := tlsStore(t, srv, srv.Endpoint, roots)
		if err := st.Check(ctx); err != nil {
			t.Fatalf("check: %v", err)
		}
		src := newRandomStream(size, 3)
		began := time.Now()
		if err := st.Put(ctx, key, src); err != nil {
			t.Fatalf("put: %v", err)
		}
		t.Logf("put %d MiB over https in %v", size>>20, time.Since(began).Round(time.Millisecond))
		rc, err := st.Get(ctx, key)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil || n != size || !bytes.Equal(h.Sum(nil), src.sum.Sum(nil)) {
			t.Fatalf("get: %d bytes (%v), sha256 %x, put %x", n, err, h.Sum(nil), src.sum.Sum(nil))
		}
	})

	t.Run("untrusted CA refused, nothing written", func(t *testing.T) {
		// No caFile: the system's roots, which do not hold the lab's CA.
		st := tlsStore(t, srv, srv.Endpoint, nil)
		wantUnknownAuthority(t, "check", st.Check(ctx))
		wantUnknownAuthority(t, "put", st.Put(ctx, "lab/etcd/untrusted.snap.kseal", newRandomStream(1<<20, 4)))
		_, err := st.Get(ctx, key)
		wantUnknownAuthority(t, "get", err)
		keys, err := srv.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys, []string{key}) {
			t.Errorf("the bucket holds %q, want only %s", keys, key)
		}
	})

	t.Run("a man in the middle receives nothing", func(t *testing.T) {
		mallory, err := s3lab.NewAuthority("mallory")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := mallory.LoopbackTLS()
		if err != nil {
			t.Fatal(err)
		}
		l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var conns, received atomic.Int64
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				go func() {
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(30 * time.Second))
					n, _ := io.Copy(io.Discard, c)
					received.Add(n)
				}()
			}
		}()
		// Kedge trusts the lab's CA (its caFile); the attacker's
		// certificate is for the same address, signed by his own CA.
		st := tlsStore(t, srv, l.Addr().String(), roots)
		snapshot := newRandomStream(1<<20, 5)
		wantUnknownAuthority(t, "put through the man in the middle", st.Put(ctx, "lab/etcd/mitm.snap.kseal", snapshot))
		if conns.Load() == 0 {
			t.Fatal("the client never reached the man in the middle: the test shows nothing")
		}
		if n := received.Load(); n != 0 {
			t.Errorf("the man in the middle received %d bytes after the handshake", n)
		}
	})
}
