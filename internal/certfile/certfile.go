package certfile

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// DefaultThreshold is 30 days.
const DefaultThreshold = 720 * time.Hour

// Cert describes one certificate.
type Cert struct {
	Subject  string `json:"subject"`
	Issuer   string `json:"issuer"`
	Serial   string `json:"serial"`
	NotAfter string `json:"notAfter"` // RFC 3339, UTC
	// Due says the certificate ends within the threshold asked.
	Due bool `json:"due"`
}

// Describe describes c, due when it ends before now+threshold.
func Describe(c *x509.Certificate, now time.Time, threshold time.Duration) Cert {
	return Cert{
		Subject:  c.Subject.String(),
		Issuer:   c.Issuer.String(),
		Serial:   fmt.Sprintf("%x", c.SerialNumber),
		NotAfter: c.NotAfter.UTC().Format(time.RFC3339),
		Due:      c.NotAfter.Before(now.Add(threshold)),
	}
}

// Parse reads the certificates of a PEM file, or the embedded client
// certificates of a kubeconfig.
func Parse(data []byte) ([]*x509.Certificate, error) {
	if !strings.Contains(string(data), "-----BEGIN") {
		return kubeconfigCerts(data)
	}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in the file")
	}
	return certs, nil
}

func kubeconfigCerts(data []byte) ([]*x509.Certificate, error) {
	var kc struct {
		Users []struct {
			User struct {
				Data string `json:"client-certificate-data"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("neither PEM nor a kubeconfig: %w", err)
	}
	var certs []*x509.Certificate
	for _, u := range kc.Users {
		if u.User.Data == "" {
			continue
		}
		pemData, err := base64.StdEncoding.DecodeString(u.User.Data)
		if err != nil {
			return nil, fmt.Errorf("client-certificate-data: %w", err)
		}
		cs, err := Parse(pemData)
		if err != nil {
			return nil, err
		}
		certs = append(certs, cs...)
	}
	if len(certs) == 0 {
		return nil, errors.New("no embedded client certificate in the kubeconfig")
	}
	return certs, nil
}
