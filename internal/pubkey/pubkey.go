package pubkey

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Parse is the public key of the first PEM block of s, which must be a
// "PUBLIC KEY" (PKIX) or an "RSA PUBLIC KEY" (PKCS #1) block.
func Parse(s string) (crypto.PublicKey, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	switch block.Type {
	case "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(block.Bytes)
	}
	return nil, fmt.Errorf("a %s block is not a public key", block.Type)
}

// Equal says whether a and b are the same key: false when a is of a kind
// the standard library cannot compare (every key it parses can).
func Equal(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}
