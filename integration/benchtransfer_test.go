package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/etcdlab"
	"kedge.dev/kedge/integration/gobin"
	"kedge.dev/kedge/integration/s3lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/runbooks/inventory"
)

// The table's rows that move 256 MiB: a file onto a host, an etcd
// snapshot off a member.

const transferBytes = 256 << 20

// sftpWrite is host.write-file of a 256 MiB file to worker-1, called
// without Temporal (a step's input could not carry the content: the
// server refuses a payload over 2 MB) over a warm pooled connection: as
// the lab's hosts become root through sudo, through the host's
// sftp-server started by sudo, into a temporary file that is synced,
// then renamed. The baseline is OpenSSH's scp of the same file to the
// same directory as the login user (OpenSSH 9's scp speaks SFTP, to
// sshd's internal-sftp), which neither syncs nor renames. Each side runs
// twice, in turn, and keeps its best: a 256 MiB write's time on this
// disk varies with what the page cache is flushing.
func sftpWrite(b *testing.B) benchRow {
	data := make([]byte, transferBytes)
	_, _ = rand.Read(data)
	local := writeSynced(b, data)
	want := sha256.Sum256(data)
	h := labHost(b, "worker-1")
	pool := sshpool.New(sshpool.Options{})
	defer pool.Close()
	acts := &sshhost.Activities{Pool: pool}
	t := worldTarget(b, "worker-1")
	// Both copies land in the login user's home, on the machine's disk
	// (the host's /tmp is a tmpfs), each removed once checked.
	write := func(p, content string) {
		if _, err := acts.WriteFile(context.Background(), host.WriteFileInput{Target: t, Path: p, Content: content, NoBackup: true}); err != nil {
			b.Fatalf("host.write-file %s: %v", p, err)
		}
	}
	write("/home/core/bench-warm", "warm") // the pool's connection and SFTP client, as a worker's
	defer func() { _, _ = h.Exec(context.Background(), "rm", "-f", "/home/core/bench-warm") }()
	content := string(data)
	kedge, base := math.Inf(1), math.Inf(1)
	for round := range 2 {
		p := fmt.Sprintf("/home/core/bench-kedge-%d.bin", round)
		stop := func() {}
		if round == 0 {
			stop = profile(b, "sftp-256MiB")
		}
		start := time.Now()
		write(p, content)
		kedge = min(kedge, time.Since(start).Seconds())
		stop()
		checkHostFile(b, h, p, want)
		p = fmt.Sprintf("/home/core/bench-scp-%d.bin", round)
		base = min(base, scpTo(b, h, local, p))
		checkHostFile(b, h, p, want)
	}
	legacy := scpTo(b, h, local, "/home/core/bench-scp-legacy.bin", "-O")
	checkHostFile(b, h, "/home/core/bench-scp-legacy.bin", want)
	return benchRow{name: "sftp-256MiB-s", kedge: kedge, baseline: base, target: 1.0, atMost: true,
		note: fmt.Sprintf("host.write-file called directly (as root: sudo'd sftp-server, synced, renamed) against `scp` (SFTP mode, "+
			"as the login user, no sync); best of 2 each; `scp -O` (the old protocol) %.2f s", legacy)}
}

// writeSynced writes data to a new local file and syncs it, so that its
// write-back does not weigh on what is measured next.
func writeSynced(b *testing.B, data []byte) string {
	f, err := os.Create(filepath.Join(b.TempDir(), "file.bin"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return f.Name()
}

// scpTo copies local to p on h with OpenSSH's scp as the lab's login
// user, and returns the seconds it took.
func scpTo(b *testing.B, h *testhosts.Host, local, p string, extra ...string) float64 {
	l := world.lab
	args := append([]string{"-q", "-i", l.IdentityFile, "-o", "UserKnownHostsFile=" + l.KnownHostsFile,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-P", fmt.Sprint(h.Port)}, extra...)
	args = append(args, local, fmt.Sprintf("%s@%s:%s", l.User, h.Address, p))
	start := time.Now()
	if out, err := exec.Command("scp", args...).CombinedOutput(); err != nil {
		b.Fatalf("scp: %v\n%s", err, out)
	}
	return time.Since(start).Seconds()
}

// worldTarget is the SSH target of the world's host name, as the world's
// inventory gives it.
func worldTarget(b *testing.B, name string) target.SSH {
	cluster, err := inventory.LoadFile(world.inventory)
	if err != nil {
		b.Fatal(err)
	}
	t, err := cluster.Target(name)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// checkHostFile fails b unless h's file at p hashes as want, then
// removes it.
func checkHostFile(b *testing.B, h *testhosts.Host, p string, want [32]byte) {
	got, err := h.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	if sha256.Sum256(got) != want {
		b.Fatalf("%s on %s: %d bytes, not the file written", p, h.Name, len(got))
	}
	if out, err := h.Exec(context.Background(), "rm", "-f", p); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
}

// etcdSnapshot is etcd.snapshot of a member the bench fills with
// 256 MiB (a real etcd over TLS), in a process of its own
// (integration/cmd/snapbench, the worker's code outside Temporal): the
// snapshot streamed from the member over etcd's gRPC API, checked and
// sealed with the codec key. Two rows:
//   - to a local directory, against `etcdctl snapshot save` of the same
//     member (gRPC) to a plain file on the same disk: the issue's
//     like-for-like;
//   - to the S3-compatible server, against what a script does: etcdctl's
//     save, then an upload of that file to the same bucket with the same
//     S3 client Kedge uses.
//
// And the process's peak RSS, which must stay under 128 MiB since
// nothing is held whole. The notes say where each side's CPU went.
func etcdSnapshot(b *testing.B) []benchRow {
	dir := b.TempDir()
	e := etcdlab.Start(b, dir, etcdlab.Options{Name: "bench", QuotaBackendBytes: 2 << 30})
	value := make([]byte, 1<<20)
	for i := range transferBytes >> 20 {
		_, _ = rand.Read(value)
		e.Put(b, fmt.Sprintf("/registry/bench/value-%03d", i), value)
	}
	srv := s3lab.StartT(b, s3lab.Options{Parent: dir, Volumes: 32}) // the baseline's copy and Kedge's
	creds := filepath.Join(dir, "s3.credentials")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf("aws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)), 0o600); err != nil {
		b.Fatal(err)
	}
	s3 := etcd.Destination{Kind: etcd.DestinationS3, Endpoint: "http://" + srv.Endpoint, Insecure: true, Bucket: srv.Bucket, Region: srv.Region, CredentialsFile: creds}
	tools, err := controlplane.Tools()
	if err != nil {
		b.Fatal(err)
	}

	// etcdctl to a file, then that file to the bucket.
	etcdCPU := cpuMeter(b, e.Pid())
	saved := filepath.Join(dir, "etcdctl.db")
	etcdctl := exec.Command(filepath.Join(tools, "etcdctl"), "--endpoints", e.Endpoint, "--cacert", e.CAFile, "--cert", e.ClientCertFile, "--key", e.ClientKeyFile,
		"snapshot", "save", saved)
	start := time.Now()
	if out, err := etcdctl.CombinedOutput(); err != nil {
		b.Fatalf("etcdctl snapshot save: %v\n%s", err, out)
	}
	base := time.Since(start).Seconds()
	baseCPU := fmt.Sprintf("etcdctl %.1f s, etcd %.1f s", processCPU(etcdctl.ProcessState), etcdCPU())
	baseRSS := float64(etcdctl.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
	weedCPU := cpuMeter(b, srv.Pid())
	upload := uploadFile(b, srv, saved)
	uploadCPU := weedCPU()
	_ = os.Remove(saved)

	etcdCPU = cpuMeter(b, e.Pid())
	local := snapshotWith(b, e, etcd.Destination{Kind: etcd.DestinationLocal, Path: filepath.Join(dir, "snapshots")}, "etcd-snapshot-local")
	localCPU := fmt.Sprintf("snapbench %.1f s, etcd %.1f s", local.cpu, etcdCPU())
	etcdCPU, weedCPU = cpuMeter(b, e.Pid()), cpuMeter(b, srv.Pid())
	remote := snapshotWith(b, e, s3, "etcd-snapshot")
	remoteCPU := fmt.Sprintf("snapbench %.1f s, etcd %.1f s, SeaweedFS %.1f s", remote.cpu, etcdCPU(), weedCPU())
	mib := float64(remote.result.Size) / (1 << 20)
	return []benchRow{
		{name: "etcd-snapshot-256MiB-s", kedge: local.seconds, baseline: base, target: 1.2, atMost: true,
			note: fmt.Sprintf("a %.0f MiB snapshot to the same disk: Kedge streams it over etcd's gRPC API, checks it and seals it into a local directory (written, synced, renamed); "+
				"`etcdctl snapshot save` (gRPC) writes a plain file, synced; CPU: Kedge's %s; etcdctl's %s", mib, localCPU, baseCPU)},
		{name: "etcd-snapshot-256MiB-s3-s", kedge: remote.seconds, baseline: base + upload, target: 1.2, atMost: true,
			note: fmt.Sprintf("the same to S3 (SeaweedFS on the same 2 cores): Kedge uploads while it reads; the baseline is etcdctl's save (%.2f s) and then the file's upload with the same S3 client (%.2f s, SeaweedFS %.1f s CPU); CPU: Kedge's %s",
				base, upload, uploadCPU, remoteCPU)},
		{name: "etcd-snapshot-256MiB-rss-mib", kedge: max(local.rssMiB, remote.rssMiB), target: 128, atMost: true,
			note: fmt.Sprintf("peak (VmHWM) of the process that took it (local %.0f, S3 %.0f MiB); etcdctl's %.0f MiB", local.rssMiB, remote.rssMiB, baseRSS)},
	}
}

// uploadFile puts the file at path into srv's bucket with the S3 client
// Kedge uses (internal/objstore), as a script would after etcdctl's save,
// and returns the seconds it took.
func uploadFile(b *testing.B, srv *s3lab.Server, path string) float64 {
	store, err := objstore.NewS3(objstore.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	if err := store.Put(context.Background(), "baseline/etcdctl.db", f); err != nil {
		b.Fatalf("upload of etcdctl's snapshot: %v", err)
	}
	return time.Since(start).Seconds()
}

// BenchmarkEtcdSnapshot is make bench's etcd snapshot rows alone, for a
// change to etcd.snapshot: `go test -run '^$' -bench '^BenchmarkEtcdSnapshot$'
// -benchtime 1x ./integration/` with $KEDGE_KUBE_TOOLS and
// $KEDGE_S3_TOOLS set as make bench sets them.
func BenchmarkEtcdSnapshot(b *testing.B) {
	var rows []benchRow
	for range b.N {
		rows = etcdSnapshot(b)
	}
	printTable(os.Stdout, rows)
	for _, r := range rows {
		b.ReportMetric(r.kedge, r.name)
	}
}

// snapshotRun is one snapbench run.
type snapshotRun struct {
	result       etcd.SnapshotResult
	seconds, cpu float64 // wall time of the process, and its CPU time
	rssMiB       float64
}

// snapshotWith runs etcd.snapshot of e to dest in snapbench, with its
// CPU profile as NAME.cpu.pprof when name is given and KEDGE_BENCH_PROFILE
// set.
func snapshotWith(b *testing.B, e *etcdlab.Etcd, dest etcd.Destination, name string) snapshotRun {
	bin, err := gobin.Build("kedge.dev/kedge/integration/cmd/snapbench")
	if err != nil {
		b.Fatal(err)
	}
	d, _ := json.Marshal(dest)
	args := []string{"-endpoint", e.Endpoint, "-ca", e.CAFile, "-cert", e.ClientCertFile, "-key", e.ClientKeyFile, "-codec-key", world.codecKey, "-dest", string(d)}
	if dir := os.Getenv("KEDGE_BENCH_PROFILE"); dir != "" && name != "" && os.MkdirAll(dir, 0o755) == nil {
		args = append(args, "-cpuprofile", filepath.Join(dir, name+".cpu.pprof"))
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("snapbench: %v\n%s", err, stderr.String())
	}
	run := snapshotRun{seconds: time.Since(start).Seconds(), cpu: processCPU(cmd.ProcessState)}
	var out struct {
		Result     etcd.SnapshotResult `json:"result"`
		PeakRSSKiB int64               `json:"peakRSSKiB"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		b.Fatalf("snapbench printed %q: %v", stdout.String(), err)
	}
	if out.Result.Size < transferBytes {
		b.Fatalf("the snapshot is %d bytes, under the %d written", out.Result.Size, transferBytes)
	}
	run.result, run.rssMiB = out.Result, float64(out.PeakRSSKiB)/1024
	return run
}

// processCPU is the user and system CPU seconds of an exited process.
func processCPU(s *os.ProcessState) float64 {
	return (s.UserTime() + s.SystemTime()).Seconds()
}

// cpuMeter returns what CPU time (user and system) process pid has
// used since the call, each time it is called.
func cpuMeter(b *testing.B, pid int) func() float64 {
	used := func() float64 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		// After the command's name, in parentheses: state is field 3,
		// utime and stime fields 14 and 15, in clock ticks (100 a second).
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		return (utime + stime) / 100
	}
	from := used()
	return func() float64 { return used() - from }
}
