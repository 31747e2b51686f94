package satoken

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// KeyID is the key ID the API server writes into the header of the
// tokens a public key's private key signs: the unpadded base64url
// SHA-256 of the key's PKIX DER. publicKey is PEM, PKIX or PKCS#1.
func KeyID(publicKey string) (string, error) {
	block, _ := pem.Decode([]byte(publicKey))
	if block == nil {
		return "", errors.New("not a PEM public key")
	}
	var der []byte
	switch block.Type {
	case "PUBLIC KEY":
		if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil {
			return "", err
		}
		der = block.Bytes
	case "RSA PUBLIC KEY":
		pub, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return "", err
		}
		if der, err = x509.MarshalPKIXPublicKey(pub); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("a PEM %q block, not a public key", block.Type)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// HeaderKeyID is the key ID in a token's header, given the token or only
// its header (the part before the first dot); "" when it names none.
func HeaderKeyID(token string) string {
	header, _, _ := strings.Cut(strings.TrimSpace(token), ".")
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(header, "="))
	if err != nil {
		return ""
	}
	var h struct {
		KeyID string `json:"kid"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return ""
	}
	return h.KeyID
}
