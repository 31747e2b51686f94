package satoken

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
)

func TestKeyIDOfBothPEMForms(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	sum := sha256.Sum256(der)
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	pkix := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if got, err := KeyID(pkix); err != nil || got != want {
		t.Errorf("PKIX: %q %v, want %q", got, err, want)
	}
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)}))
	if got, err := KeyID(pkcs1); err != nil || got != want {
		t.Errorf("PKCS#1: %q %v, want %q", got, err, want)
	}
	for _, bad := range []string{"", "not pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"} {
		if _, err := KeyID(bad); err == nil {
			t.Errorf("KeyID(%q) accepted", bad)
		}
	}
}

func TestHeaderKeyID(t *testing.T) {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"abc"}`))
	for tok, want := range map[string]string{
		h + ".payload.signature": "abc",
		h:                        "abc",
		h + "==.x.y":             "abc",
		"!!!.x.y":                "",
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`)) + ".x.y": "",
		"": "",
	} {
		if got := HeaderKeyID(tok); got != want {
			t.Errorf("HeaderKeyID(%q) = %q, want %q", tok, got, want)
		}
	}
}
