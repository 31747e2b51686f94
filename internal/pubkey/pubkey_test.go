package pubkey

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
)

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func pkix(t *testing.T, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("PUBLIC KEY", der)
}

func TestParseBothForms(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		pem  string
		want crypto.PublicKey
	}{
		"PKIX RSA":            {pkix(t, &rk.PublicKey), &rk.PublicKey},
		"PKIX ECDSA":          {pkix(t, &ek.PublicKey), &ek.PublicKey},
		"PKIX Ed25519":        {pkix(t, edPub), edPub},
		"PKCS #1 RSA":         {pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rk.PublicKey)), &rk.PublicKey},
		"text around the PEM": {"the key:\n" + pkix(t, &ek.PublicKey) + "trailing words\n", &ek.PublicKey},
	} {
		got, err := Parse(c.pem)
		if err != nil || !Equal(got, c.want) {
			t.Errorf("%s: Parse = %T %v, want the key", name, got, err)
		}
	}
	if got, _ := Parse(pkix(t, &rk.PublicKey)); Equal(got, &ek.PublicKey) {
		t.Error("an RSA key is Equal to an ECDSA key")
	}
}

func TestParseRefuses(t *testing.T) {
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(ek)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ pem, want string }{
		"empty":           {"", "no PEM block"},
		"not PEM":         {"ssh-ed25519 AAAAC3Nza", "no PEM block"},
		"a private key":   {pemOf("EC PRIVATE KEY", der), "a EC PRIVATE KEY block is not a public key"},
		"a certificate":   {pemOf("CERTIFICATE", []byte("x")), "a CERTIFICATE block is not a public key"},
		"PKIX garbage":    {pemOf("PUBLIC KEY", []byte("garbage")), "asn1"},
		"PKCS #1 garbage": {pemOf("RSA PUBLIC KEY", []byte("garbage")), "asn1"},
	} {
		if got, err := Parse(c.pem); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Parse = %T %v, want an error saying %q", name, got, err, c.want)
		}
	}
}

func TestEqualOfAKindThatCannotCompare(t *testing.T) {
	if Equal(struct{}{}, struct{}{}) {
		t.Error("a value without an Equal method is Equal")
	}
}
