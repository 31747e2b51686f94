package certfile

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

func selfSignedPEM(t *testing.T, cn string, life time.Duration) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(4242), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(life)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestParsePEMAndKubeconfig(t *testing.T) {
	pemData := selfSignedPEM(t, "system:kube-scheduler", time.Hour)
	certs, err := Parse(pemData)
	if err != nil || len(certs) != 1 || certs[0].Subject.CommonName != "system:kube-scheduler" {
		t.Fatalf("PEM: %v %v", certs, err)
	}
	kc := "apiVersion: v1\nkind: Config\nusers:\n- name: s\n  user:\n    client-certificate-data: " + base64.StdEncoding.EncodeToString(pemData) + "\n    client-key-data: eA==\n"
	certs, err = Parse([]byte(kc))
	if err != nil || len(certs) != 1 || certs[0].Subject.CommonName != "system:kube-scheduler" {
		t.Fatalf("kubeconfig: %v %v", certs, err)
	}
	if _, err := Parse([]byte("apiVersion: v1\nkind: Config\nusers:\n- name: t\n  user:\n    token: x\n")); err == nil || !strings.Contains(err.Error(), "no embedded client certificate") {
		t.Errorf("token kubeconfig: %v", err)
	}
	if _, err := Parse([]byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n")); err == nil {
		t.Error("a key file parsed as a certificate")
	}
}

func TestDescribeSaysDue(t *testing.T) {
	certs, err := Parse(selfSignedPEM(t, "etcd", 24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if d := Describe(certs[0], time.Now(), DefaultThreshold); !d.Due || d.Serial != "1092" || d.Subject != "CN=etcd" {
		t.Errorf("%+v", d)
	}
	if d := Describe(certs[0], time.Now(), time.Hour); d.Due {
		t.Errorf("a certificate ending in a day is due within an hour: %+v", d)
	}
}
