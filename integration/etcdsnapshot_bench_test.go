package integration

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	api "kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/s3lab"
)

// BenchmarkEtcdSnapshot256MiB: etcd.snapshot of an etcd the bench fills
// with 256 MiB (a real etcd over TLS), sealed with the codec key and
// uploaded to the S3-compatible server, in a process of its own
// (integration/cmd/snapbench, the worker's code outside Temporal): its
// time, and its peak RSS, which must stay under 128 MiB since nothing is
// held whole.
func BenchmarkEtcdSnapshot256MiB(b *testing.B) {
	dir := b.TempDir()
	e := startBenchEtcd(b, dir)
	value := make([]byte, 1<<20)
	began := time.Now()
	for i := range 256 {
		_, _ = rand.Read(value)
		e.put(b, fmt.Sprintf("/registry/bench/value-%03d", i), value)
	}
	b.Logf("etcd filled with 256 MiB in %s", time.Since(began).Round(time.Millisecond))
	srv := s3lab.StartT(b, s3lab.Options{})
	creds := filepath.Join(dir, "s3.credentials")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf("aws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)), 0o600); err != nil {
		b.Fatal(err)
	}
	dest, _ := json.Marshal(api.Destination{Kind: api.DestinationS3, Endpoint: "http://" + srv.Endpoint, Insecure: true, Bucket: srv.Bucket, Region: srv.Region, CredentialsFile: creds})
	bin := filepath.Join(dir, "snapbench")
	if out, err := exec.Command("go", "build", "-o", bin, "kedge.dev/kedge/integration/cmd/snapbench").CombinedOutput(); err != nil {
		b.Fatalf("build snapbench: %v\n%s", err, out)
	}
	b.ResetTimer()
	for range b.N {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "-endpoint", e.endpoint, "-ca", e.caFile, "-cert", e.certFile, "-key", e.keyFile, "-codec-key", world.codecKey, "-s3", string(dest))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("snapbench: %v\n%s", err, stderr.String())
		}
		var out struct {
			Result     api.SnapshotResult `json:"result"`
			Seconds    float64            `json:"seconds"`
			PeakRSSKiB int64              `json:"peakRSSKiB"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			b.Fatalf("snapbench printed %q: %v", stdout.String(), err)
		}
		mib := float64(out.Result.Size) / (1 << 20)
		rss := float64(out.PeakRSSKiB) / 1024
		b.ReportMetric(out.Seconds, "s/snapshot")
		b.ReportMetric(mib/out.Seconds, "MiB/s")
		b.ReportMetric(rss, "MiB-peak-RSS")
		b.Logf("snapshot of %.0f MiB (revision %d) sealed and uploaded to S3 in %.1fs (%.0f MiB/s); the process's peak RSS %.0f MiB",
			mib, out.Result.Revision, out.Seconds, mib/out.Seconds, rss)
		if out.Result.Size < 256<<20 {
			b.Errorf("the snapshot is %d bytes, under the 256 MiB written", out.Result.Size)
		}
		if rss >= 128 {
			b.Errorf("peak RSS %.0f MiB: over the 128 MiB target", rss)
		}
	}
}

// benchEtcd is one etcd member serving its clients over TLS, with a client
// certificate from its CA in files.
type benchEtcd struct {
	endpoint                  string
	caFile, certFile, keyFile string
	http                      *http.Client
}

// startBenchEtcd starts etcd (the tools' binary) on loopback with its own
// CA and waits until it answers.
func startBenchEtcd(b *testing.B, dir string) *benchEtcd {
	b.Helper()
	tools, err := controlplane.Tools()
	if err != nil {
		b.Fatal(err)
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench etcd CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		b.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(name string, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			b.Fatal(err)
		}
		return p
	}
	leaf := func(name, cn string, usage ...x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
		tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			b.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(key)
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", kd)
	}
	e := &benchEtcd{caFile: write("ca.crt", "CERTIFICATE", caDER)}
	// etcd's gateway reaches its own gRPC server with the server's
	// certificate as a client: it needs both usages.
	serverCert, serverKey := leaf("server", "etcd-server", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	e.certFile, e.keyFile = leaf("client", "kedge-etcd-client", x509.ExtKeyUsageClientAuth)
	ports := make([]string, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		_, ports[i], _ = net.SplitHostPort(ln.Addr().String())
		_ = ln.Close()
	}
	e.endpoint = "https://127.0.0.1:" + ports[0]
	peer := "http://127.0.0.1:" + ports[1]
	logFile, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(tools, "etcd"), "--name", "bench", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", e.endpoint, "--advertise-client-urls", e.endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "bench="+peer,
		"--cert-file", serverCert, "--key-file", serverKey, "--trusted-ca-file", e.caFile, "--client-cert-auth",
		"--quota-backend-bytes", fmt.Sprint(2<<30), "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logFile.Close()
	})
	pair, err := tls.LoadX509KeyPair(e.certFile, e.keyFile)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	e.http = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Leader string `json:"leader"`
		}
		err := e.call("/v3/maintenance/status", map[string]any{}, &st)
		if err == nil && st.Leader != "" && st.Leader != "0" {
			return e
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			b.Fatalf("etcd exited (%v):\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("etcd did not answer within 30s: %v", err)
		}
	}
}

func (e *benchEtcd) call(path string, req, out any) error {
	body, _ := json.Marshal(req)
	resp, err := e.http.Post(e.endpoint+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// put writes a key through the gateway.
func (e *benchEtcd) put(b *testing.B, key string, value []byte) {
	b.Helper()
	if err := e.call("/v3/kv/put", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(key)), "value": base64.StdEncoding.EncodeToString(value)}, nil); err != nil {
		b.Fatal(err)
	}
}
