package tlsprobe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/certinfo"

	"kedge.dev/kedge/actions/errtype"
)

// testCA is a CA that signs certificates for the tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T, cn string, parent *testCA) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	signCert, signKey := tmpl, key
	if parent != nil {
		signCert, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signCert, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// leaf is a serving certificate for 127.0.0.1 from ca, presented with
// the intermediates given.
func (ca *testCA) leaf(t *testing.T, cn string, intermediates ...*testCA) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	out := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	for _, i := range intermediates {
		out.Certificate = append(out.Certificate, i.cert.Raw)
	}
	return out
}

// httpsServer serves cert; clientCerts makes it demand a client
// certificate (as etcd does on 2379 and 2380), in TLS 1.3 or, with
// tls12, in TLS 1.2, where the handshake itself then fails.
func httpsServer(t *testing.T, cert tls.Certificate, clientCerts, tls12 bool) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the clients refused for want of a certificate
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCerts {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = x509.NewCertPool()
	}
	if tls12 {
		srv.TLS.MaxVersion = tls.VersionTLS12
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A scan names the CA each endpoint's certificate comes from (through a
// presented intermediate too), self-signed ones as such, and reads the
// chain of endpoints that demand a client certificate, in TLS 1.3 and
// 1.2. Endpoints presenting a refused CA fail it, not retried, named
// with their subject and issuer; an endpoint not scanned fails it,
// retried.
func TestScanCANamesTheCAOfEachEndpoint(t *testing.T) {
	oldCA, newCA := newTestCA(t, "old CA", nil), newTestCA(t, "new CA", nil)
	inter := newTestCA(t, "new intermediate", newCA)
	other := newTestCA(t, "other CA", nil)
	self, _ := selfSigned(t, "kubelet self-signed", time.Hour)
	api6443 := httpsServer(t, oldCA.leaf(t, "kube-apiserver"), false, false)
	etcd13 := httpsServer(t, newCA.leaf(t, "etcd server"), true, false)
	etcd12 := httpsServer(t, oldCA.leaf(t, "etcd peer"), true, true)
	chained := httpsServer(t, inter.leaf(t, "front proxy", inter), false, false)
	kubelet := httpsServer(t, self, false, false)
	foreign := httpsServer(t, other.leaf(t, "someone else's"), false, false)
	cas := []certinfo.NamedCA{{Name: "old", Certificate: oldCA.pem}, {Name: "new", Certificate: newCA.pem}}

	in := certinfo.ScanCAInput{Endpoints: []string{api6443, etcd13, etcd12, chained, kubelet, foreign}, CAs: cas}
	res, err := ScanCA(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ ca, subject, issuer string }{
		{"old", "CN=kube-apiserver", "CN=old CA"}, {"new", "CN=etcd server", "CN=new CA"}, {"old", "CN=etcd peer", "CN=old CA"},
		{"new", "CN=front proxy", "CN=new intermediate"}, {certinfo.SelfSigned, "CN=kubelet self-signed", "CN=kubelet self-signed"},
		{"", "CN=someone else's", "CN=other CA"},
	}
	for i, w := range want {
		r := res.Endpoints[i]
		if r.Endpoint != in.Endpoints[i] || r.CA != w.ca || r.Subject != w.subject || r.Issuer != w.issuer || r.Error != "" || r.NotAfter == "" || r.Serial == "" {
			t.Errorf("endpoint %d: %+v, want CA %q, %s from %s", i, r, w.ca, w.subject, w.issuer)
		}
	}
	if !slices.Equal(res.Presenting["old"], []string{api6443, etcd12}) || !slices.Equal(res.Presenting["new"], []string{etcd13, chained}) {
		t.Errorf("presenting %v", res.Presenting)
	}

	var ae *temporal.ApplicationError
	in.Refuse = []string{"old"}
	_, err = ScanCA(t.Context(), in)
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.CAStillPresented) || !ae.NonRetryable() {
		t.Fatalf("old CA refused: %v", err)
	}
	for _, s := range []string{api6443 + ` presents "CN=kube-apiserver" issued by "CN=old CA"`, etcd12 + ` presents "CN=etcd peer"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal does not say %q: %v", s, err)
		}
	}
	if strings.Contains(err.Error(), etcd13) {
		t.Errorf("the refusal names an endpoint of the new CA: %v", err)
	}

	// Only the new CA presented: clean.
	in = certinfo.ScanCAInput{Endpoints: []string{etcd13, chained}, CAs: cas, Refuse: []string{"old"}}
	if res, err := ScanCA(t.Context(), in); err != nil || len(res.Presenting["old"]) != 0 {
		t.Errorf("new CA only: %+v %v", res, err)
	}

	down := closedPort(t)
	in.Endpoints = append(in.Endpoints, down)
	res, err = ScanCA(t.Context(), in)
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.EndpointUnreachable) || ae.NonRetryable() || !strings.Contains(err.Error(), "not known clean") || !strings.Contains(err.Error(), down) {
		t.Errorf("an endpoint down: %v", err)
	}
	if len(res.Endpoints) != 3 || res.Endpoints[2].Error == "" || res.Endpoints[2].CA != "" {
		t.Errorf("the endpoint down's row: %+v", res.Endpoints)
	}
}

func TestScanCARefusesWhatItCannotUse(t *testing.T) {
	ca := newTestCA(t, "a CA", nil)
	for _, c := range []struct {
		name string
		in   certinfo.ScanCAInput
		want string
	}{
		{"no endpoints", certinfo.ScanCAInput{CAs: []certinfo.NamedCA{{Name: "a", Certificate: ca.pem}}}, "endpoints are required"},
		{"not host:port", certinfo.ScanCAInput{Endpoints: []string{"https://x:6443"}, CAs: []certinfo.NamedCA{{Name: "a", Certificate: ca.pem}}}, "not host:port"},
		{"no CAs", certinfo.ScanCAInput{Endpoints: []string{"x:1"}}, "cas are required"},
		{"not PEM", certinfo.ScanCAInput{Endpoints: []string{"x:1"}, CAs: []certinfo.NamedCA{{Name: "a", Certificate: "junk"}}}, "not PEM"},
		{"two of a name", certinfo.ScanCAInput{Endpoints: []string{"x:1"}, CAs: []certinfo.NamedCA{{Name: "a", Certificate: ca.pem}, {Name: "a", Certificate: ca.pem}}}, "two CAs"},
		{"refuse unknown", certinfo.ScanCAInput{Endpoints: []string{"x:1"}, CAs: []certinfo.NamedCA{{Name: "a", Certificate: ca.pem}}, Refuse: []string{"b"}}, "not among the CAs"},
		{"a CA named self-signed", certinfo.ScanCAInput{Endpoints: []string{"x:1"}, CAs: []certinfo.NamedCA{{Name: certinfo.SelfSigned, Certificate: ca.pem}}}, "call the CA otherwise"},
	} {
		_, err := ScanCA(t.Context(), c.in)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || !errtype.Is(err, errtype.InvalidInput) || !ae.NonRetryable() || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want InvalidInput saying %q", c.name, err, c.want)
		}
	}
}

// Before a change that restarts the servers: an endpoint whose
// certificate ends within the window fails the scan, not retried, named
// with its subject and end; without CAs to tell apart, the scan still
// reads every endpoint.
func TestScanCARefusesCertificatesEndingWithinTheWindow(t *testing.T) {
	ca := newTestCA(t, "cluster CA", nil)
	soon := httpsServer(t, ca.leaf(t, "kube-apiserver"), false, false) // ends in an hour
	later, _ := selfSigned(t, "kubelet", 48*time.Hour)
	kubelet := httpsServer(t, later, false, false)

	in := certinfo.ScanCAInput{Endpoints: []string{soon, kubelet}, ExpiresWithin: "24h"}
	_, err := ScanCA(t.Context(), in)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.CertificateExpiring) || !ae.NonRetryable() ||
		!strings.Contains(err.Error(), "1 of 2 endpoints present a certificate that ends before") ||
		!strings.Contains(err.Error(), soon+` presents "CN=kube-apiserver", which ends `) || strings.Contains(err.Error(), kubelet) {
		t.Fatalf("a certificate ending within 24h: %v", err)
	}
	in.ExpiresWithin = "30m"
	if res, err := ScanCA(t.Context(), in); err != nil || len(res.Endpoints) != 2 {
		t.Errorf("every certificate lasting beyond 30m: %+v %v", res, err)
	}
	if _, err := ScanCA(t.Context(), certinfo.ScanCAInput{Endpoints: []string{soon}}); err == nil || !strings.Contains(err.Error(), "cas are required") {
		t.Errorf("neither CAs nor a window: %v", err)
	}
}
