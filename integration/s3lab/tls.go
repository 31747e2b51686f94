package s3lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Authority is a throwaway certificate authority: a test makes one, signs
// server certificates with it, and trusts it or not.
type Authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate
}

// NewAuthority makes a CA named cn, valid for a day.
func NewAuthority(cn string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is a pool holding only this CA.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.cert)
	return p
}

// Loopback signs a serving certificate for 127.0.0.1 and localhost and
// returns it and its key, PEM.
func (a *Authority) Loopback() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "s3lab"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), nil
}

// LoopbackTLS is Loopback as a tls.Certificate, for a server of the test's
// own (a man in the middle).
func (a *Authority) LoopbackTLS() (tls.Certificate, error) {
	c, k, err := a.Loopback()
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// writeTLS makes the server's CA and serving certificate in its
// directory: CAFile (what a client trusts) and the certificate and key
// (mode 0600) weed's S3 gateway serves with.
func (s *Server) writeTLS() (certFile, keyFile string, err error) {
	ca, err := NewAuthority("s3lab CA")
	if err != nil {
		return "", "", err
	}
	c, k, err := ca.Loopback()
	if err != nil {
		return "", "", err
	}
	s.CAFile = filepath.Join(s.dir, "ca.crt")
	s.RootCAs = ca.Pool()
	certFile, keyFile = filepath.Join(s.dir, "s3.crt"), filepath.Join(s.dir, "s3.key")
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{s.CAFile, ca.PEM, 0o644}, {certFile, c, 0o644}, {keyFile, k, 0o600}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return "", "", err
		}
	}
	return certFile, keyFile, nil
}
