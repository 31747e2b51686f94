package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

// clientPair makes a client certificate and key valid until notAfter.
func clientPair(t *testing.T, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:n1"},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM
}

func writeKubeconfig(t *testing.T, path string, user *clientcmdapi.AuthInfo) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.41.9:6443"}
	cfg.AuthInfos["u"] = user
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

func TestKubeconfigStillValidAsTheKubeletJudgesIt(t *testing.T) {
	dir := t.TempDir()
	cert, key := clientPair(t, time.Now().Add(time.Hour))
	oldCert, oldKey := clientPair(t, time.Now().Add(-time.Minute))

	writeKubeconfig(t, filepath.Join(dir, "good"), &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key})
	writeKubeconfig(t, filepath.Join(dir, "expired"), &clientcmdapi.AuthInfo{ClientCertificateData: oldCert, ClientKeyData: oldKey})
	writeKubeconfig(t, filepath.Join(dir, "token"), &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
	pemFile := filepath.Join(dir, "kubelet-client-current.pem")
	writeFile(t, pemFile, string(cert)+string(key), 0o600)
	writeKubeconfig(t, filepath.Join(dir, "file"), &clientcmdapi.AuthInfo{ClientCertificate: pemFile, ClientKey: pemFile})

	for _, tc := range []struct {
		name  string
		valid bool
		why   string
	}{
		{"good", true, ""},
		{"file", true, ""},
		{"expired", false, "client certificate expired"},
		{"token", false, "holds no client certificate"},
		{"missing", false, "missing"},
	} {
		ok, why := kubeconfigStillValid(filepath.Join(dir, tc.name))
		if ok != tc.valid || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %t %q, want %t %q", tc.name, ok, why, tc.valid, tc.why)
		}
	}
}
