package etcdlab

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/integration/controlplane"

	"kedge.dev/kedge/internal/freeport"
)

// Options configure a member.
type Options struct {
	// Name is the member's name; empty: "lab".
	Name string
	// QuotaBackendBytes is etcd's --quota-backend-bytes; 0: etcd's default.
	QuotaBackendBytes int64
}

// Etcd is a running one-member etcd serving its clients over TLS with
// client-certificate auth.
type Etcd struct {
	Endpoint string            // https://127.0.0.1:port
	CA       *x509.Certificate // the CA of the server's and the client's certificates
	CAPEM    string
	CAFile   string
	// A client certificate from CA (client auth, CN kedge-etcd-client),
	// PEM and in files.
	ClientCertPEM, ClientKeyPEM   string
	ClientCertFile, ClientKeyFile string
	// HTTP trusts CA and presents the client certificate.
	HTTP *http.Client

	dir  string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // how it exited, once done is closed
	stop sync.Once
}

// readyTimeout bounds the wait for a leader.
const readyTimeout = time.Minute

// Start starts a member in a new directory under dir, waits until it
// answers with a leader, and registers its Stop as a Cleanup of t. It
// fails t when any of that fails.
func Start(t testing.TB, dir string, o Options) *Etcd {
	t.Helper()
	if o.Name == "" {
		o.Name = "lab"
	}
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatalf("etcdlab: %v", err)
	}
	own, err := os.MkdirTemp(dir, "etcd-"+o.Name+"-")
	if err != nil {
		t.Fatalf("etcdlab: %v", err)
	}
	e := &Etcd{dir: own, log: filepath.Join(own, "etcd.log"), done: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("etcdlab: the tail of etcd's log:\n%s", e.logTail())
		}
		e.Stop()
	})
	serverCert, serverKey, err := e.makeCerts()
	if err != nil {
		t.Fatalf("etcdlab: certificates: %v", err)
	}
	if err := e.run(filepath.Join(tools, "etcd"), o, serverCert, serverKey); err != nil {
		t.Fatalf("etcdlab: %v", err)
	}
	if err := e.waitLeader(); err != nil {
		t.Fatalf("etcdlab: %v", err)
	}
	return e
}

// makeCerts makes the CA, the server's and the client's certificates,
// writes them into the member's directory and builds HTTP. It returns the
// server certificate's and key's files.
func (e *Etcd) makeCerts() (string, string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdlab CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	if e.CA, err = x509.ParseCertificate(der); err != nil {
		return "", "", err
	}
	e.CAPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	// etcd's gateway reaches its own gRPC server with the server's
	// certificate as a client: it needs both usages (as kubeadm's has).
	serverCert, serverKey, err := leaf(e.CA, caKey, "etcd-server", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return "", "", err
	}
	if e.ClientCertPEM, e.ClientKeyPEM, err = leaf(e.CA, caKey, "kedge-etcd-client", x509.ExtKeyUsageClientAuth); err != nil {
		return "", "", err
	}
	var serverCertFile, serverKeyFile string
	files := []struct {
		name, data string
		path       *string
	}{
		{"ca.crt", e.CAPEM, &e.CAFile}, {"server.crt", serverCert, &serverCertFile}, {"server.key", serverKey, &serverKeyFile},
		{"client.crt", e.ClientCertPEM, &e.ClientCertFile}, {"client.key", e.ClientKeyPEM, &e.ClientKeyFile},
	}
	for _, f := range files {
		*f.path = filepath.Join(e.dir, f.name)
		if err := os.WriteFile(*f.path, []byte(f.data), 0o600); err != nil {
			return "", "", err
		}
	}
	pair, err := tls.X509KeyPair([]byte(e.ClientCertPEM), []byte(e.ClientKeyPEM))
	if err != nil {
		return "", "", err
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.CA)
	e.HTTP = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
	return serverCertFile, serverKeyFile, nil
}

// leaf issues a certificate of ca for 127.0.0.1: PEM certificate and key.
func leaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage ...x509.ExtKeyUsage) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})), nil
}

// run starts etcd; its log goes to etcd.log.
func (e *Etcd) run(bin string, o Options, serverCert, serverKey string) error {
	ports, err := freeport.Pick("127.0.0.1", 2)
	if err != nil {
		return err
	}
	e.Endpoint = "https://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	args := []string{"--name", o.Name, "--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", e.Endpoint, "--advertise-client-urls", e.Endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", o.Name + "=" + peer,
		"--cert-file", serverCert, "--key-file", serverKey, "--trusted-ca-file", e.CAFile, "--client-cert-auth",
		"--log-level", "warn"}
	if o.QuotaBackendBytes > 0 {
		args = append(args, "--quota-backend-bytes", strconv.FormatInt(o.QuotaBackendBytes, 10))
	}
	logf, err := os.Create(e.log)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with the test binary, should that die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start etcd: %w", err)
	}
	e.cmd = cmd
	go func() { e.err = cmd.Wait(); logf.Close(); close(e.done) }()
	return nil
}

var errNoLeader = errors.New("no leader")

// waitLeader waits until the member answers through its gateway and
// reports a leader, or has exited, or readyTimeout has passed.
func (e *Etcd) waitLeader() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var st struct {
			Leader string `json:"leader"`
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := e.call(pctx, "/v3/maintenance/status", map[string]any{}, &st)
		pcancel()
		if err == nil && (st.Leader == "" || st.Leader == "0") {
			err = errNoLeader
		}
		if err == nil {
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("etcd exited before it had a leader (%w):\n%s", e.err, e.logTail())
		case <-ctx.Done():
			return fmt.Errorf("etcd at %s had no leader within %s: %w", e.Endpoint, readyTimeout, err)
		case <-tick.C:
		}
	}
}

// Call posts req as JSON to the gateway's path (e.g. /v3/kv/put) and
// decodes the answer into out, unless out is nil. An answer other than
// 200 is an error.
func (e *Etcd) Call(path string, req, out any) error {
	return e.call(context.Background(), path, req, out)
}

func (e *Etcd) call(ctx context.Context, path string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := e.HTTP.Do(hreq)
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

// Put writes a key through the gateway, failing t if it cannot.
func (e *Etcd) Put(t testing.TB, key string, value []byte) {
	t.Helper()
	req := map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(key)), "value": base64.StdEncoding.EncodeToString(value)}
	if err := e.Call("/v3/kv/put", req, nil); err != nil {
		t.Fatalf("etcdlab: put %s: %v", key, err)
	}
}

func (e *Etcd) logTail() string {
	b, _ := os.ReadFile(e.log)
	tail := string(b)
	if len(tail) > 3000 {
		tail = tail[len(tail)-3000:]
	}
	return tail
}

// Pid is the etcd process's.
func (e *Etcd) Pid() int { return e.cmd.Process.Pid }

// Stop kills etcd and removes its directory. Start registers it as a
// Cleanup; calling it again does nothing.
func (e *Etcd) Stop() {
	e.stop.Do(func() {
		if e.cmd != nil && e.cmd.Process != nil {
			_ = e.cmd.Process.Kill()
			<-e.done
		}
		_ = os.RemoveAll(e.dir)
	})
}
