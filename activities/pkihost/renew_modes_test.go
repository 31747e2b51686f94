package pkihost

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/activities/vaultapi"
	"kedge.dev/kedge/integration/sshtest"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/target"
)

// testCA is a CA the test signs with, as Vault would with the adopted one.
type testCA struct {
	cert *x509.Certificate
	pem  string
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, cn string, notAfter time.Time) testCA {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return testCA{cert: c, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), key: k}
}

// leaf is a certificate and key from ca ending at notAfter.
func (ca testCA) leaf(t *testing.T, cn string, notAfter time.Time) (certPEM, keyPEM string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: []string{"api.example"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter}, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
}

// fakeVault signs CSRs verbatim with the issuer named in the path, as
// Vault's PKI does, refusing (as Vault does) a certificate that would
// outlive its issuer or a request with both ttl and not_after.
type fakeVault struct {
	cas   map[string]testCA
	mu    sync.Mutex
	signs int
}

func (f *fakeVault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/v1/pki/issuer/")
	refuse := func(msg string) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{msg}})
	}
	ref, rest, _ := strings.Cut(p, "/")
	ca, ok := f.cas[ref]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{"no issuer " + ref}})
		return
	}
	if rest == "json" {
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"certificate": ca.pem}})
		return
	}
	var req map[string]any
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &req)
	notAfter := time.Now().Add(720 * time.Hour)
	na, hasNA := req["not_after"].(string)
	ttl, hasTTL := req["ttl"].(string)
	switch {
	case hasNA && hasTTL:
		refuse("Either ttl or not_after should be provided. Both should not be provided in the same request.")
		return
	case hasNA:
		notAfter, _ = time.Parse(time.RFC3339, na)
	case hasTTL:
		d, _ := time.ParseDuration(ttl)
		notAfter = time.Now().Add(d)
	}
	if notAfter.After(ca.cert.NotAfter) {
		refuse("cannot satisfy request, as TTL would result in notAfter of " + notAfter.UTC().Format(time.RFC3339Nano) +
			" that is beyond the expiration of the CA certificate at " + ca.cert.NotAfter.UTC().Format(time.RFC3339Nano))
		return
	}
	block, _ := pem.Decode([]byte(req["csr"].(string)))
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		refuse(err.Error())
		return
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: csr.Subject,
		DNSNames: csr.DNSNames, IPAddresses: csr.IPAddresses, NotBefore: time.Now(), NotAfter: notAfter}, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		refuse(err.Error())
		return
	}
	f.mu.Lock()
	f.signs++
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"certificate": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}})
}

// typhoonController is a controller's PKI laid out as Typhoon lays it
// out, under root: /etc/kubernetes/pki 0644 root, keys included;
// /etc/ssl/etcd etcd's (232), 0500.
type typhoonController struct {
	root       string
	vaultURL   string
	files      map[string]string
	acts       *Activities
	target     target.SSH
	vault      *fakeVault
	ca, etcdCA testCA
}

func newTyphoonController(t *testing.T, caEnd, leafEnd time.Time) *typhoonController {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("files owned by others need root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	root, err := os.MkdirTemp("", "kedge-renew-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &typhoonController{root: root, ca: newTestCA(t, "kubernetes-ca", caEnd), etcdCA: newTestCA(t, "etcd-ca", caEnd)}
	pki, etcd := filepath.Join(root, "etc/kubernetes/pki"), filepath.Join(root, "etc/ssl/etcd/etcd")
	for _, d := range []string{pki, etcd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	apiCert, apiKey := c.ca.leaf(t, "kube-apiserver", leafEnd)
	srvCert, srvKey := c.etcdCA.leaf(t, "etcd-server", leafEnd)
	c.files = map[string]string{
		layout.FileAPIServerCert:  filepath.Join(pki, "apiserver.crt"),
		layout.FileAPIServerKey:   filepath.Join(pki, "apiserver.key"),
		layout.FileEtcdServerCert: filepath.Join(etcd, "server.crt"),
		layout.FileEtcdServerKey:  filepath.Join(etcd, "server.key"),
	}
	for p, content := range map[string]string{c.files[layout.FileAPIServerCert]: apiCert, c.files[layout.FileAPIServerKey]: apiKey} {
		writeOwned(t, p, content, 0o644, 0, 0)
	}
	for p, content := range map[string]string{c.files[layout.FileEtcdServerCert]: srvCert, c.files[layout.FileEtcdServerKey]: srvKey} {
		writeOwned(t, p, content, 0o500, 232, 232)
	}
	for _, d := range []string{filepath.Dir(etcd), etcd} {
		if err := os.Chown(d, 232, 232); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o500); err != nil {
			t.Fatal(err)
		}
	}
	srv := sshtest.Start(t, sshtest.Config{})
	pool := sshpool.New(sshpool.Options{})
	t.Cleanup(func() { pool.Close() })
	c.vault = &fakeVault{cas: map[string]testCA{"cluster": c.ca, "etcd": c.etcdCA}}
	vs := httptest.NewServer(c.vault)
	t.Cleanup(vs.Close)
	c.vaultURL = vs.URL
	t.Setenv("VAULT_TOKEN", "test-token")
	c.acts = &Activities{Hosts: &sshhost.Activities{Pool: pool, BackupDir: filepath.Join(srv.Dir, "backup")}, Vault: &vaultapi.Activities{}}
	c.target = target.SSH{Node: "tyc1", Address: srv.Host, Port: srv.Port, IdentityFile: srv.IdentityFile, KnownHostsFile: srv.KnownHostsFile}
	return c
}

func writeOwned(t *testing.T, p, content string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func (c *typhoonController) renew(t *testing.T) (pki.RenewResult, error) {
	return c.acts.RenewInPlace(t.Context(), pki.RenewInput{Target: c.target, Vault: target.Vault{Address: c.vaultURL}, Files: c.files,
		CACert: c.ca.pem, Issuer: "cluster", EtcdCACert: c.etcdCA.pem, EtcdIssuer: "etcd", Threshold: "720h", TTL: "8760h",
		Kind: layout.KindTyphoonFlatcar, RunAs: map[string]layout.RunAs{
			"kube-apiserver": {User: "65534", From: "kube-apiserver.yaml: securityContext"},
			"etcd":           {User: "232", Group: "232", From: "etcd-member.service: docker run --user 232:232"},
		}})
}

func ownerAndMode(t *testing.T, p string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode().Perm()
}

// On a controller laid out as Typhoon lays it out, a renewal keeps every
// file's mode, owner and group (keys 0644 root, etcd's 0500 etcd's), so
// the API server running as nobody still reads its key; the renewed
// certificates end with their CA, not a year later (which Vault refuses);
// the readers say who reads each file and host.check-readable passes.
func TestRenewInPlaceKeepsModesAndOwners(t *testing.T) {
	caEnd := time.Now().Add(2000 * time.Hour).Truncate(time.Second)
	c := newTyphoonController(t, caEnd, time.Now().Add(100*time.Hour))
	res, err := c.renew(t)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || len(res.Renewed) != 2 || !res.Etcd || !res.ControlPlane {
		t.Fatalf("renewal: %+v", res)
	}
	for p, want := range map[string][3]uint32{
		c.files[layout.FileAPIServerCert]:  {0, 0, 0o644},
		c.files[layout.FileAPIServerKey]:   {0, 0, 0o644},
		c.files[layout.FileEtcdServerCert]: {232, 232, 0o500},
		c.files[layout.FileEtcdServerKey]:  {232, 232, 0o500},
	} {
		uid, gid, mode := ownerAndMode(t, p)
		if [3]uint32{uid, gid, uint32(mode)} != want {
			t.Errorf("%s: %d:%d %o, want %d:%d %o", p, uid, gid, mode, want[0], want[1], want[2])
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(p, ".crt") {
			leaf, err := firstCert(b)
			if err != nil {
				t.Fatal(err)
			}
			if !leaf.NotAfter.Equal(caEnd) {
				t.Errorf("%s ends %s, want its CA's end %s", p, leaf.NotAfter, caEnd)
			}
		}
	}
	want := map[string]string{
		c.files[layout.FileAPIServerCert]:  "kube-apiserver 65534",
		c.files[layout.FileAPIServerKey]:   "kube-apiserver 65534",
		c.files[layout.FileEtcdServerCert]: "etcd 232",
		c.files[layout.FileEtcdServerKey]:  "etcd 232",
	}
	if len(res.Readers) != len(want) {
		t.Errorf("readers: %+v", res.Readers)
	}
	for _, r := range res.Readers {
		if got := r.Reader + " " + r.User; got != want[r.Path] {
			t.Errorf("%s read by %s, want %s", r.Path, got, want[r.Path])
		}
	}
	if _, err := c.acts.Hosts.(*sshhost.Activities).CheckReadable(t.Context(), host.CheckReadableInput{Target: c.target, Files: res.Readers}); err != nil {
		t.Errorf("after the renewal: %v", err)
	}
}

// A key that was not there is made with the layout's documented mode and
// owner.
func TestRenewInPlaceMakesAMissingKeyAsTheLayoutDocuments(t *testing.T) {
	c := newTyphoonController(t, time.Now().Add(2000*time.Hour), time.Now().Add(100*time.Hour))
	key := c.files[layout.FileAPIServerKey]
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if _, err := c.renew(t); err != nil {
		t.Fatal(err)
	}
	if uid, gid, mode := ownerAndMode(t, key); uid != 0 || gid != 0 || mode != 0o644 {
		t.Errorf("%s made %d:%d %o, want Typhoon's 0:0 644", key, uid, gid, mode)
	}
}

// With the CA itself ending within the window nothing is signed nor
// installed, and the refusal names the CA, its end and the CA rotation
// runbook.
func TestRenewInPlaceRefusesACAEndingWithinTheWindow(t *testing.T) {
	caEnd := time.Now().Add(500 * time.Hour).Truncate(time.Second)
	c := newTyphoonController(t, caEnd, time.Now().Add(100*time.Hour))
	before, _ := os.ReadFile(c.files[layout.FileAPIServerKey])
	_, err := c.renew(t)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.CAWithinRenewalWindow) || !ae.NonRetryable() {
		t.Fatalf("want a non-retryable %s, got %v", errtype.CAWithinRenewalWindow, err)
	}
	for _, want := range []string{`the cluster CA "kubernetes-ca" ends ` + caEnd.UTC().Format(time.RFC3339), "threshold 720h", "Nothing was renewed on tyc1", "rotation runbook (ca-rotation)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if after, _ := os.ReadFile(c.files[layout.FileAPIServerKey]); string(after) != string(before) || c.vault.signs != 0 {
		t.Errorf("something was renewed (%d signed)", c.vault.signs)
	}
}

func TestCheckCALife(t *testing.T) {
	far := newTestCA(t, "kubernetes-ca", time.Now().Add(8760*time.Hour))
	soon := newTestCA(t, "etcd-ca", time.Now().Add(400*time.Hour).Truncate(time.Second))
	res, err := CheckCALife(t.Context(), pki.CheckCALifeInput{Threshold: "720h", CAs: []pki.NamedCA{{Name: "the cluster CA", Certificate: far.pem}}})
	if err != nil || len(res.CAs) != 1 || res.CAs[0].Subject != "kubernetes-ca" {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = CheckCALife(t.Context(), pki.CheckCALifeInput{Threshold: "720h", CAs: []pki.NamedCA{
		{Name: "the cluster CA (kedge/clusters/tyc/ca)", Certificate: far.pem},
		{Name: "etcd's CA (kedge/clusters/tyc/etcd-ca)", Certificate: soon.pem},
	}})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.CAWithinRenewalWindow) || !ae.NonRetryable() {
		t.Fatalf("want a non-retryable %s, got %v", errtype.CAWithinRenewalWindow, err)
	}
	want := `etcd's CA (kedge/clusters/tyc/etcd-ca) "etcd-ca" ends ` + soon.cert.NotAfter.UTC().Format(time.RFC3339) +
		`, within the renewal window (threshold 720h): no certificate can outlive the CA that issues it, so what is renewed would be due again at once` +
		` and the cluster still stops when the CA ends. Nothing was renewed and no host was changed.` +
		` The CA must be rotated first: run the CA rotation runbook (ca-rotation), then cert-renewal`
	if ae.Message() != want {
		t.Errorf("message\n got %s\nwant %s", ae.Message(), want)
	}
	// A shorter window lets it renew.
	if _, err := CheckCALife(t.Context(), pki.CheckCALifeInput{Threshold: "240h", CAs: []pki.NamedCA{{Name: "etcd's CA", Certificate: soon.pem}}}); err != nil {
		t.Errorf("240h: %v", err)
	}
}

// A key its reader could not read as it was found stays so (0600 root),
// and the read check of the readers refuses it before any restart,
// naming the file, the reader and its uid.
func TestTheReadersOfARenewalAreCheckedAsTheyRun(t *testing.T) {
	c := newTyphoonController(t, time.Now().Add(2000*time.Hour), time.Now().Add(100*time.Hour))
	key := c.files[layout.FileAPIServerKey]
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := c.renew(t)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, mode := ownerAndMode(t, key); mode != 0o600 {
		t.Errorf("%s: mode %o, want the 600 it had", key, mode)
	}
	_, err = c.acts.Hosts.(*sshhost.Activities).CheckReadable(t.Context(), host.CheckReadableInput{Target: c.target, Files: res.Readers})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.Unreadable) || !ae.NonRetryable() {
		t.Fatalf("want a non-retryable %s, got %v", errtype.Unreadable, err)
	}
	if want := "kube-apiserver (uid 65534 gid 65534) cannot read " + key + " (root:root 600)"; !strings.Contains(err.Error(), want) {
		t.Errorf("%q lacks %q", err, want)
	}
}
