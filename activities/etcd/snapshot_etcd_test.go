package etcd

import (
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
	"strings"
	"testing"
	"time"
)

// realEtcd is one etcd member from the test world's tools, serving its
// clients over TLS with client certificates from its own CA.
type realEtcd struct {
	endpoint string
	caPEM    string
	issuer   fakeIssuer // client certificates from etcd's CA, as Vault issues them
	http     *http.Client
}

// startEtcd starts etcd (the binary in $KEDGE_KUBE_TOOLS, built by
// scripts/kube-tools.sh) on loopback and waits until it answers.
func startEtcd(t *testing.T) *realEtcd {
	t.Helper()
	tools := os.Getenv("KEDGE_KUBE_TOOLS")
	if tools == "" {
		t.Skip("KEDGE_KUBE_TOOLS is not set (export KEDGE_KUBE_TOOLS=$(bash scripts/kube-tools.sh)): these tests run a real etcd")
	}
	dir := t.TempDir()
	ca, caKey := newCA(t)
	// etcd's gateway reaches its own gRPC server with the server's
	// certificate as a client: it needs both usages (as kubeadm's has).
	serverCert, serverKey := issue(t, ca, caKey, "etcd-server", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	clientCert, clientKey := issue(t, ca, caKey, "kedge-etcd-client", x509.ExtKeyUsageClientAuth)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}))
	for name, data := range map[string]string{"ca.crt": caPEM, "server.crt": serverCert, "server.key": serverKey} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	client, peer := freePort(t), freePort(t)
	clientURL, peerURL := "https://127.0.0.1:"+client, "http://127.0.0.1:"+peer
	cmd := exec.Command(filepath.Join(tools, "etcd"), "--name", "m1", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "m1="+peerURL,
		"--cert-file", filepath.Join(dir, "server.crt"), "--key-file", filepath.Join(dir, "server.key"),
		"--trusted-ca-file", filepath.Join(dir, "ca.crt"), "--client-cert-auth", "--log-level", "warn")
	logFile, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logFile.Close()
	})
	pair, err := tls.X509KeyPair([]byte(clientCert), []byte(clientKey))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	e := &realEtcd{endpoint: clientURL, caPEM: caPEM, issuer: fakeIssuer{cert: clientCert, key: clientKey},
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}}
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
			t.Fatalf("etcd exited (%v):\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not answer within 30s: %v", err)
		}
	}
}

func (e *realEtcd) call(path string, req, out any) error {
	body, _ := json.Marshal(req)
	resp, err := e.http.Post(e.endpoint+path, "application/json", strings.NewReader(string(body)))
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
func (e *realEtcd) put(t *testing.T, key string, value []byte) {
	t.Helper()
	if err := e.call("/v3/kv/put", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(key)), "value": base64.StdEncoding.EncodeToString(value)}, nil); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return ca, key
}

// issue is a leaf of ca for 127.0.0.1, PEM certificate and key.
func issue(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage ...x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
}
