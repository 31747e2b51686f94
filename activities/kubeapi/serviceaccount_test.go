package kubeapi

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	"kedge.dev/kedge/internal/pubkey"
)

func jws(t *testing.T, alg string, sign func([]byte) []byte) string {
	t.Helper()
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `","kid":"k1"}`))
	body := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"system:serviceaccount:default:default"}`))
	sum := sha256.Sum256([]byte(head + "." + body))
	return head + "." + body + "." + base64.RawURLEncoding.EncodeToString(sign(sum[:]))
}

func pubPEM(t *testing.T, k crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// A token verifies with the key that signed it and with no other, RSA
// (Typhoon's service-account key) and ECDSA (Kedge's) alike.
func TestVerifyJWTWithTheSigningKeyOnly(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs := jws(t, "RS256", func(d []byte) []byte {
		s, err := rsa.SignPKCS1v15(rand.Reader, rk, crypto.SHA256, d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	es := jws(t, "ES256", func(d []byte) []byte {
		r, s, err := ecdsa.Sign(rand.Reader, ek, d)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	})
	// The RS256 token's claims under a header saying alg none.
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + rs[strings.Index(rs, "."):]
	for _, c := range []struct {
		token string
		key   crypto.PublicKey
		ok    bool
	}{
		{rs, &rk.PublicKey, true}, {rs, &other.PublicKey, false}, {rs, &ek.PublicKey, false},
		{es, &ek.PublicKey, true}, {es, &rk.PublicKey, false},
		{"a.b", &rk.PublicKey, false}, {none, &rk.PublicKey, false},
	} {
		pub, err := pubkey.Parse(pubPEM(t, c.key))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := verifyJWT(c.token, pub); (err == nil) != c.ok {
			t.Errorf("verify %.20s… with %T: err %v, want ok=%v", c.token, c.key, err, c.ok)
		}
	}
}
