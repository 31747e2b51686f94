package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/integration/etcdlab"
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
	e := etcdlab.Start(b, dir, etcdlab.Options{Name: "bench", QuotaBackendBytes: 2 << 30})
	value := make([]byte, 1<<20)
	began := time.Now()
	for i := range 256 {
		_, _ = rand.Read(value)
		e.Put(b, fmt.Sprintf("/registry/bench/value-%03d", i), value)
	}
	b.Logf("etcd filled with 256 MiB in %s", time.Since(began).Round(time.Millisecond))
	srv := s3lab.StartT(b, s3lab.Options{})
	creds := filepath.Join(dir, "s3.credentials")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf("aws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)), 0o600); err != nil {
		b.Fatal(err)
	}
	dest, _ := json.Marshal(etcd.Destination{Kind: etcd.DestinationS3, Endpoint: "http://" + srv.Endpoint, Insecure: true, Bucket: srv.Bucket, Region: srv.Region, CredentialsFile: creds})
	bin := filepath.Join(dir, "snapbench")
	if out, err := exec.Command("go", "build", "-o", bin, "kedge.dev/kedge/integration/cmd/snapbench").CombinedOutput(); err != nil {
		b.Fatalf("build snapbench: %v\n%s", err, out)
	}
	b.ResetTimer()
	for range b.N {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "-endpoint", e.Endpoint, "-ca", e.CAFile, "-cert", e.ClientCertFile, "-key", e.ClientKeyFile, "-codec-key", world.codecKey, "-s3", string(dest))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("snapbench: %v\n%s", err, stderr.String())
		}
		var out struct {
			Result     etcd.SnapshotResult `json:"result"`
			Seconds    float64             `json:"seconds"`
			PeakRSSKiB int64               `json:"peakRSSKiB"`
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
