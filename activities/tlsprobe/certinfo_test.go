package tlsprobe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/actions/certinfo"
	"kedge.dev/kedge/actions/errtype"
)

func selfSigned(t *testing.T, cn string, life time.Duration) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(4242), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(life), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// serve answers TLS on loopback; clientCerts makes it demand a client
// certificate, as etcd does.
func serve(t *testing.T, cert tls.Certificate, clientCerts bool) string {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCerts {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = x509.NewCertPool()
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	return l.Addr().String()
}

func TestCheckReadsTheServedCertificate(t *testing.T) {
	for _, clientCerts := range []bool{false, true} {
		cert, _ := selfSigned(t, "kube-apiserver", 10*24*time.Hour)
		addr := serve(t, cert, clientCerts)
		res, err := Check(t.Context(), certinfo.CheckInput{Address: addr, Threshold: "720h"})
		if err != nil {
			t.Fatalf("client certs %t: %v", clientCerts, err)
		}
		if res.Subject != "CN=kube-apiserver" || res.Serial != "1092" || !res.Due {
			t.Errorf("client certs %t: %+v", clientCerts, res)
		}
		res, err = Check(t.Context(), certinfo.CheckInput{Address: addr, Threshold: "24h"})
		if err != nil || res.Due {
			t.Errorf("a certificate with 10 days left is due within 24h: %+v %v", res, err)
		}
	}
}

func TestCheckErrors(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	_, err := Check(t.Context(), certinfo.CheckInput{Address: addr, Timeout: "2s"})
	var app *temporal.ApplicationError
	if !asApp(err, &app) || !errtype.Is(err, errtype.EndpointUnreachable) || app.NonRetryable() {
		t.Errorf("closed port: %v", err)
	}
	_, err = Check(t.Context(), certinfo.CheckInput{Address: "no-port"})
	if !asApp(err, &app) || !errtype.Is(err, errtype.InvalidInput) || !app.NonRetryable() {
		t.Errorf("bad address: %v", err)
	}
}

func asApp(err error, app **temporal.ApplicationError) bool {
	a, ok := err.(*temporal.ApplicationError)
	*app = a
	return ok
}

func TestCheckWaitsForANewerCertificate(t *testing.T) {
	cert, _ := selfSigned(t, "etcd", 10*24*time.Hour)
	addr := serve(t, cert, false)
	first, err := Check(t.Context(), certinfo.CheckInput{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Check(t.Context(), certinfo.CheckInput{Address: addr, NewerThan: first.NotAfter, Wait: "1500ms"})
	var app *temporal.ApplicationError
	if !asApp(err, &app) || !errtype.Is(err, errtype.CertificateNotRenewed) {
		t.Fatalf("the same certificate counted as renewed: %v", err)
	}
	older := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	res, err := Check(t.Context(), certinfo.CheckInput{Address: addr, NewerThan: older, Wait: "5s"})
	if err != nil || res.NotAfter != first.NotAfter {
		t.Errorf("%+v %v", res, err)
	}
}

// A renewal capped at its CA's end serves a certificate that ends no
// later than the old one: notSerial waits for a different certificate.
func TestCheckWaitsForAnotherCertificate(t *testing.T) {
	cert, _ := selfSigned(t, "kube-apiserver", 10*24*time.Hour)
	addr := serve(t, cert, false)
	first, err := Check(t.Context(), certinfo.CheckInput{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Check(t.Context(), certinfo.CheckInput{Address: addr, NotSerial: first.Serial, Wait: "1500ms"})
	var app *temporal.ApplicationError
	if !asApp(err, &app) || !errtype.Is(err, errtype.CertificateNotRenewed) || !strings.Contains(err.Error(), "other than serial "+first.Serial) {
		t.Fatalf("the same certificate counted as renewed: %v", err)
	}
	res, err := Check(t.Context(), certinfo.CheckInput{Address: addr, NotSerial: "01", Wait: "5s"})
	if err != nil || res.Serial != first.Serial {
		t.Errorf("%+v %v", res, err)
	}
}

// A wait resumed after a lost worker keeps the first attempt's deadline.
func TestAWaitResumedPastItsDeadlineStops(t *testing.T) {
	cert, _ := selfSigned(t, "etcd", 10*24*time.Hour)
	addr := serve(t, cert, false)
	first, err := Check(t.Context(), certinfo.CheckInput{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetHeartbeatDetails(waitProgress{StartedAt: time.Now().Add(-10 * time.Minute)})
	env.RegisterActivityWithOptions(Check, activity.RegisterOptions{Name: certinfo.CheckAction})
	done := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity(certinfo.CheckAction, certinfo.CheckInput{Address: addr, NotSerial: first.Serial, Wait: "5m"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errtype.Is(err, errtype.CertificateNotRenewed) {
			t.Fatalf("got %v, want CertificateNotRenewed at the first attempt's deadline", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("still waiting after a minute: the first attempt's deadline was not kept")
	}
}
