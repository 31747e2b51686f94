package pkihost

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func testCert(t *testing.T, cn string) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestKubeconfigCredentialsEmbeddedOrReferenced(t *testing.T) {
	old := testCert(t, "system:kube-scheduler")
	embedded := "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://api.example:6443 # the API name\n" +
		"users:\n- name: scheduler\n  user:\n    client-certificate-data: " + base64.StdEncoding.EncodeToString([]byte(old)) +
		"\n    client-key-data: " + base64.StdEncoding.EncodeToString([]byte("OLD KEY")) + "\n"
	if cert, key, err := kubeconfigCredential([]byte(embedded)); err != nil || cert != "" || key != "" {
		t.Errorf("embedded: %q %q %v", cert, key, err)
	}
	c, err := embeddedCert([]byte(embedded))
	if err != nil || c.Subject.CommonName != "system:kube-scheduler" {
		t.Fatalf("embedded cert: %v %v", c, err)
	}
	renewed := testCert(t, "system:kube-scheduler")
	doc, err := setEmbedded([]byte(embedded), renewed, "NEW KEY")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), base64.StdEncoding.EncodeToString([]byte("NEW KEY"))) ||
		strings.Contains(string(doc), base64.StdEncoding.EncodeToString([]byte("OLD KEY"))) ||
		!strings.Contains(string(doc), "server: https://api.example:6443 # the API name") {
		t.Errorf("after setEmbedded:\n%s", doc)
	}
	if c, err := embeddedCert(doc); err != nil || c.Equal(mustFirst(t, old)) {
		t.Errorf("the certificate was not replaced (%v)", err)
	}

	referenced := "users:\n- name: kubelet\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n"
	if cert, key, err := kubeconfigCredential([]byte(referenced)); err != nil || cert != "/var/lib/kubelet/pki/kubelet-client-current.pem" || key != cert {
		t.Errorf("referenced: %q %q %v", cert, key, err)
	}
	for _, bad := range []string{"users: []\n", "users:\n- user: {token: abc}\n", "users: [\n"} {
		if _, _, err := kubeconfigCredential([]byte(bad)); err == nil {
			t.Errorf("kubeconfigCredential(%q): no error", bad)
		}
	}
}

func mustFirst(t *testing.T, s string) *x509.Certificate {
	t.Helper()
	c, err := firstCert([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
