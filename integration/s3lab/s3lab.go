package s3lab

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"kedge.dev/kedge/integration/toolsdir"

	"kedge.dev/kedge/internal/freeport"
)

// Region is the region the lab's server is addressed with (SeaweedFS
// accepts any).
const Region = "us-east-1"

// Options configure a server.
type Options struct {
	// Bucket to create; empty: "kedge-backups".
	Bucket string
	// Parent of the server's temporary directory; empty: os.TempDir().
	Parent string
	// TLS: the S3 endpoint serves HTTPS only, with a certificate for
	// 127.0.0.1 signed by a CA made for this server (Server.CAFile).
	TLS bool
	// Volumes is how many 64 MB volumes the server may make; 0: 16
	// (1 GiB, of which a fresh bucket can fill about half).
	Volumes int
}

// Server is a running SeaweedFS S3 gateway with one bucket.
type Server struct {
	Endpoint  string // 127.0.0.1:port, plain HTTP or, with Options.TLS, HTTPS
	Region    string
	Bucket    string
	AccessKey string // Kedge's identity: read, write and list Bucket
	SecretKey string
	// CAFile (PEM) and RootCAs hold the CA that signed the endpoint's
	// certificate, with Options.TLS; empty otherwise.
	CAFile  string
	RootCAs *x509.CertPool

	admin   credential
	dir     string
	volumes int
	log     string
	sockets []string // weed's fixed-path gRPC sockets
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	stop    sync.Once
}

var tools = toolsdir.Dir{Env: "KEDGE_S3_TOOLS", Script: "s3-tools.sh", What: "the S3 server (seaweedfs)"}

// Tools returns the directory holding the weed binary: $KEDGE_S3_TOOLS,
// or else built by scripts/s3-tools.sh (cached per version).
func Tools() (string, error) { return tools.Get() }

// StartT starts a server for a test and stops it when the test ends; on
// failure it logs the tail of the server's log first.
func StartT(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("s3lab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("s3lab: the tail of weed's log:\n%s", s.logTail())
		}
		s.Stop()
	})
	return s
}

var errExited = errors.New("weed exited")

// Start starts a server on free loopback ports in a new temporary
// directory, waits until its S3 endpoint answers and creates the bucket.
func Start(ctx context.Context, o Options) (*Server, error) {
	dir, err := Tools()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "weed")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("weed binary: %w", err)
	}
	if o.Bucket == "" {
		o.Bucket = "kedge-backups"
	}
	// Ports are free when chosen but may be taken before weed binds them;
	// a server that exits before answering is retried on others.
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, bin, o)
		if err == nil {
			return s, nil
		}
		if attempt == 3 || ctx.Err() != nil || !errors.Is(err, errExited) {
			return nil, err
		}
	}
}

func start(ctx context.Context, bin string, o Options) (*Server, error) {
	dir, err := os.MkdirTemp(o.Parent, "s3lab-")
	if err != nil {
		return nil, err
	}
	s := &Server{Region: Region, Bucket: o.Bucket, dir: dir, volumes: cmp.Or(o.Volumes, 16), log: filepath.Join(dir, "weed.log"), done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	admin, err := s.writeIdentities()
	if err != nil {
		return nil, err
	}
	s.admin = admin
	ports, err := freeport.Pick("127.0.0.1", 8)
	if err != nil {
		return nil, err
	}
	s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[6]))
	var tlsArgs []string
	if o.TLS {
		cert, key, err := s.writeTLS()
		if err != nil {
			return nil, err
		}
		// Without -s3.port.https, the S3 port itself serves HTTPS.
		tlsArgs = []string{"-s3.cert.file=" + cert, "-s3.key.file=" + key}
	}
	if err := s.run(bin, ports, tlsArgs...); err != nil {
		return nil, err
	}
	if err := s.createBucket(ctx, admin); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

type credential struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

type identity struct {
	Name        string       `json:"name"`
	Credentials []credential `json:"credentials"`
	Actions     []string     `json:"actions"`
}

// writeIdentities writes the S3 identities file (mode 0600) and returns
// the administrator's credential.
func (s *Server) writeIdentities() (credential, error) {
	var keys [4]string
	for i := range keys {
		b := make([]byte, 20)
		if _, err := rand.Read(b); err != nil {
			return credential{}, err
		}
		keys[i] = hex.EncodeToString(b)
	}
	admin := credential{AccessKey: "LABADMIN" + strings.ToUpper(keys[0][:12]), SecretKey: keys[1]}
	s.AccessKey, s.SecretKey = "KEDGE"+strings.ToUpper(keys[2][:15]), keys[3]
	b := s.Bucket
	cfg := map[string][]identity{"identities": {
		{Name: "lab-admin", Credentials: []credential{admin}, Actions: []string{"Admin", "Read", "Write", "List", "Tagging"}},
		{Name: "kedge", Credentials: []credential{{s.AccessKey, s.SecretKey}}, Actions: []string{"Read:" + b, "Write:" + b, "List:" + b}},
	}}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return credential{}, err
	}
	return admin, os.WriteFile(filepath.Join(s.dir, "s3.json"), data, 0o600)
}

// URL is the endpoint as an inventory names it: https:// with
// Options.TLS, http:// otherwise.
func (s *Server) URL() string {
	if s.RootCAs != nil {
		return "https://" + s.Endpoint
	}
	return "http://" + s.Endpoint
}

func (s *Server) run(bin string, p []int, extra ...string) error {
	data := filepath.Join(s.dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return err
	}
	logf, err := os.Create(s.log)
	if err != nil {
		return err
	}
	port := func(i int) string { return strconv.Itoa(p[i]) }
	// weed server names these itself, under /tmp whatever TMPDIR says.
	for i, name := range []string{"master", "volume", "filer", "s3"} {
		s.sockets = append(s.sockets, fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", name, p[2*i+1]))
	}
	// -logtostderr: its log to the server's own file only (glog writes
	// files under /tmp otherwise, left after the server).
	args := []string{"-logtostderr", "server",
		"-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + port(0), "-master.port.grpc=" + port(1), "-master.telemetry=false",
		"-master.volumeSizeLimitMB=64",
		"-volume.port=" + port(2), "-volume.port.grpc=" + port(3), "-volume.max=" + strconv.Itoa(s.volumes), "-volume.preStopSeconds=0",
		"-filer", "-filer.port=" + port(4), "-filer.port.grpc=" + port(5),
		"-filer.localSocket=" + filepath.Join(s.dir, "filer.sock"),
		"-s3", "-s3.port=" + port(6), "-s3.port.grpc=" + port(7),
		"-s3.localSocket=" + filepath.Join(s.dir, "s3.sock"),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.autoCreateBucket=false",
		"-s3.config=" + filepath.Join(s.dir, "s3.json"),
	}
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Dir = s.dir
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so Stop reaches anything it starts; killed
	// with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start weed: %w", err)
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	return nil
}

// serverEnv is this process's environment without AWS_* and WEED_*
// variables, so a developer's own settings never reach the lab server.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "WEED_") {
			env = append(env, kv)
		}
	}
	return env
}

// probeBucket holds the write probe, apart from Bucket: a probe request
// that timed out on this side may still land on the server later, and
// must never show up in what Kedge lists.
const probeBucket = "s3lab-probe"

// createBucket creates the bucket as the administrator, retrying until the
// S3 gateway and its filer answer, then writes a probe object into another
// bucket until a write succeeds (the filer's lock ring forms seconds after
// the gateway answers), so the server takes writes when Start returns.
func (s *Server) createBucket(ctx context.Context, admin credential) error {
	ac, err := s.client(admin)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	var step string
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%w before answering (%s): %s", errExited, step, s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		for _, b := range []string{s.Bucket, probeBucket} {
			step = "create bucket " + b
			err = ac.MakeBucket(rctx, b, minio.MakeBucketOptions{Region: s.Region})
			if err != nil && minio.ToErrorResponse(err).Code == minio.BucketAlreadyOwnedByYou {
				err = nil
			}
			if err != nil {
				break
			}
		}
		if err == nil {
			step = "write a probe object"
			_, err = ac.PutObject(rctx, probeBucket, "probe", strings.NewReader("probe"), 5, minio.PutObjectOptions{})
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("s3 at %s not ready (%s): %w\n%s", s.Endpoint, step, err, s.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) client(c credential) (*minio.Client, error) {
	o := &minio.Options{
		Creds:  credentials.NewStaticV4(c.AccessKey, c.SecretKey, ""),
		Region: s.Region,
	}
	if s.RootCAs != nil {
		tr, err := minio.DefaultTransport(true)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.RootCAs}
		o.Secure, o.Transport = true, tr
	}
	return minio.New(s.Endpoint, o)
}

// Keys lists every object in the bucket as the lab's administrator sees
// it, whatever Kedge's identity may do: what a test checks was, or was
// not, written.
func (s *Server) Keys(ctx context.Context) ([]string, error) {
	ac, err := s.client(s.admin)
	if err != nil {
		return nil, err
	}
	var keys []string
	for o := range ac.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		keys = append(keys, o.Key)
	}
	return keys, nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	tail := string(b)
	if len(tail) > 3000 {
		tail = tail[len(tail)-3000:]
	}
	return tail
}

// Pid is the server process's ID.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop kills the server's process group and removes its directory and
// the gRPC sockets weed makes in /tmp. SIGKILL at once: nothing it holds
// is kept, and on SIGTERM weed takes five seconds to shut down.
func (s *Server) Stop() {
	s.stop.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		for _, sock := range s.sockets {
			if st, err := os.Lstat(sock); err == nil && st.Mode().Type() == os.ModeSocket {
				_ = os.Remove(sock)
			}
		}
		_ = os.RemoveAll(s.dir)
	})
}
