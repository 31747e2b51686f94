package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// NodeKubeconfig is a kubeconfig, certificates inlined, with which a
// kubelet authenticates as itself: a client certificate for
// system:node:NAME in group system:nodes, signed by the cluster CA. The API
// server's Node authorizer and NodeRestriction then limit it to its own
// Node and the pods bound to it, as on a real cluster; never cluster-admin.
func (cp *ControlPlane) NodeKubeconfig(node string) ([]byte, error) {
	caPEM, err := os.ReadFile(cp.CAFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(cp.CAKeyFile)
	if err != nil {
		return nil, err
	}
	caBlock, _ := pem.Decode(caPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if caBlock == nil || keyBlock == nil {
		return nil, fmt.Errorf("node credentials for %s: the CA files are not PEM", node)
	}
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		return nil, err
	}
	caKey, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	user := "system:node:" + node
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kedge"] = &clientcmdapi.Cluster{Server: cp.Server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	cfg.Contexts["kedge"] = &clientcmdapi.Context{Cluster: "kedge", AuthInfo: user}
	cfg.CurrentContext = "kedge"
	return clientcmd.Write(*cfg)
}
