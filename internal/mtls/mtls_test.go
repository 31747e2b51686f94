package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func pool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data) {
		t.Fatal("ca.pem holds no certificate")
	}
	return p
}

func pair(t *testing.T, dir, name string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshake runs a TLS handshake over loopback TCP: a server with
// serverDir's certificate that requires a client certificate from its CA,
// and a client with clientDir's NAME certificate that verifies the server
// against serverDir's CA.
func handshake(t *testing.T, serverDir, clientDir, client, serverName string) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		srv := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{pair(t, serverDir, "server")},
			ClientCAs: pool(t, serverDir), ClientAuth: tls.RequireAndVerifyClientCert})
		done <- srv.Handshake()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := tls.Client(c, &tls.Config{Certificates: []tls.Certificate{pair(t, clientDir, client)},
		RootCAs: pool(t, serverDir), ServerName: serverName})
	cerr := cl.Handshake()
	if cerr != nil {
		c.Close() // the server's read ends
	}
	if serr := <-done; serr != nil {
		return serr
	}
	return cerr
}

func TestGenerateMakesAWorkingMutualTLSSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	res, err := Generate(Options{Dir: dir, ServerName: "temporal", Hosts: []string{"10.0.0.5", "temporal.example"}, Clients: DefaultClients, TaskQueues: []string{"kedge"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2*(2+len(DefaultClients)) {
		t.Fatalf("files: %+v", res.Files)
	}
	for _, f := range res.Files {
		if !f.Written {
			t.Errorf("%s not written on the first run", f.Path)
		}
		st, err := os.Stat(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f.Path, ".key") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", f.Path, st.Mode().Perm())
		}
	}
	for _, name := range []string{"temporal", "localhost", "127.0.0.1", "10.0.0.5", "temporal.example"} {
		if err := handshake(t, dir, dir, "kedge-worker", name); err != nil {
			t.Errorf("server name %s: %v", name, err)
		}
	}
	if err := handshake(t, dir, dir, "kedge-worker", "other.example"); err == nil {
		t.Error("a name the server certificate does not hold was accepted")
	}
	// A client certificate from another CA is refused by the server.
	other := filepath.Join(t.TempDir(), "other")
	if _, err := Generate(Options{Dir: other, ServerName: "temporal", Clients: []string{"eve:operator"}}); err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, dir, other, "eve", "temporal"); err == nil {
		t.Error("the server accepted a client certificate from another CA")
	}
	// A client certificate cannot serve.
	c := pair(t, dir, "operator")
	leaf, _ := x509.ParseCertificate(c.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool(t, dir), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate is good for serving")
	}
}

func TestGenerateKeepsWhatExistsAndAddsClients(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{"operator"}}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "server.pem"))
	res, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{"operator", "alice:operator"}})
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, f := range res.Files {
		if f.Written {
			written = append(written, filepath.Base(f.Path))
		}
	}
	if !slices.Equal(written, []string{"alice.pem", "alice.key"}) {
		t.Errorf("second run wrote %v, want alice's pair only", written)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "server.pem"))
	if string(before) != string(after) {
		t.Error("the server certificate was replaced")
	}
	// alice's certificate is signed by the same CA.
	if err := handshake(t, dir, dir, "alice", "temporal"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"../etc/x", "Alice", "ca", "server", "", "a/b"} {
		if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{bad}}); err == nil {
			t.Errorf("client name %q accepted", bad)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "ca.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{"bob:viewer"}}); err == nil || !strings.Contains(err.Error(), "ca.key") {
		t.Error("a CA key others may read was used")
	}
}

func leafCert(t *testing.T, dir, name string) *x509.Certificate {
	t.Helper()
	c := pair(t, dir, name)
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// Each certificate says what its holder may do: the default clients the
// role their program needs, a named client the role it was given, a
// worker the task queues it polls; the server's is the system's.
func TestEveryCertificateCarriesItsRole(t *testing.T) {
	dir := t.TempDir()
	clients := append(slices.Clone(DefaultClients), "alice:operator", "bob:viewer", "lyon-1:worker", "root:admin")
	if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: clients, TaskQueues: []string{"lyon", "odd queue/1"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]Identity{
		"server":         {Name: "temporal", Role: RoleSystem},
		"kedge-worker":   {Name: "kedge-worker", Role: RoleWorker, TaskQueues: []string{"lyon", "odd queue/1"}},
		"kedge-webhook":  {Name: "kedge-webhook", Role: RoleOperator},
		"kedge-setup":    {Name: "kedge-setup", Role: RoleAdmin},
		"temporal-ui":    {Name: "temporal-ui", Role: RoleViewer},
		"temporal-admin": {Name: "temporal-admin", Role: RoleAdmin},
		"operator":       {Name: "operator", Role: RoleOperator},
		"viewer":         {Name: "viewer", Role: RoleViewer},
		"alice":          {Name: "alice", Role: RoleOperator},
		"bob":            {Name: "bob", Role: RoleViewer},
		"lyon-1":         {Name: "lyon-1", Role: RoleWorker, TaskQueues: []string{"lyon", "odd queue/1"}},
		"root":           {Name: "root", Role: RoleAdmin},
	}
	for file, w := range want {
		got, err := IdentityOf(leafCert(t, dir, file))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if got.Name != w.Name || got.Role != w.Role || !slices.Equal(got.TaskQueues, w.TaskQueues) {
			t.Errorf("%s: identity %+v, want %+v", file, got, w)
		}
	}
	for _, bad := range []string{"carol", "carol:root", "carol:system", "carol:", ":viewer"} {
		if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{bad}, TaskQueues: []string{"kedge"}}); err == nil {
			t.Errorf("client %q accepted", bad)
		}
	}
	if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{"paris-1:worker"}}); err == nil ||
		!strings.Contains(err.Error(), "task queues") {
		t.Errorf("a worker certificate without task queues: %v", err)
	}
	if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{"alice:viewer"}}); err == nil ||
		!strings.Contains(err.Error(), "has role operator, not viewer") {
		t.Errorf("alice kept as an operator when asked for a viewer: %v", err)
	}
}

// A pair made before certificates had roles is named, not kept silently:
// Kedge's Temporal would refuse it everything.
func TestGenerateNamesACertificateWithoutARole(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{"operator"}}); err != nil {
		t.Fatal(err)
	}
	ca, caKey, err := loadPair(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "old", Organization: []string{"kedge"}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	if err := issue(tmpl, ca, caKey, filepath.Join(dir, "old.pem"), filepath.Join(dir, "old.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := IdentityOf(leafCert(t, dir, "old")); !errors.Is(err, ErrNoRole) {
		t.Errorf("a certificate without an OU: %v, want ErrNoRole", err)
	}
	_, err = Generate(Options{Dir: dir, ServerName: "temporal", Clients: []string{"old:operator"}})
	if err == nil || !strings.Contains(err.Error(), "old.pem") || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("a kept certificate without a role: %v", err)
	}
}
