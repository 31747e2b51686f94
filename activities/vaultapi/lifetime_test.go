package vaultapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/actions/vault"
)

func TestLifetimeNeverOutlivesTheLimit(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	caEnd := now.Add(100 * time.Hour)
	for _, c := range []struct {
		name     string
		ttl      time.Duration
		ttlText  string
		limit    time.Time
		explicit bool
		want     map[string]any
		capped   bool
	}{
		{"no limit known", 8760 * time.Hour, "8760h", time.Time{}, false, map[string]any{"ttl": "8760h"}, false},
		{"within the CA's life", 10 * time.Minute, "10m", caEnd, false, map[string]any{"ttl": "10m"}, false},
		{"outliving the CA", 8760 * time.Hour, "8760h", caEnd, false, map[string]any{"not_after": "2026-12-01T14:00:00Z"}, true},
		{"ending with the CA", 100 * time.Hour, "100h", caEnd, false, map[string]any{"ttl": "100h"}, false},
		{"the role's ttl", 0, "", caEnd, false, map[string]any{}, false},
		{"the role's ttl, a limit asked", 0, "", caEnd, true, map[string]any{"not_after": "2026-12-01T14:00:00Z"}, true},
		{"a limit with fractions", 8760 * time.Hour, "8760h", caEnd.Add(1500 * time.Millisecond), false, map[string]any{"not_after": "2026-12-01T14:00:01Z"}, true},
	} {
		got, capped := lifetime(now, c.ttl, c.ttlText, c.limit, c.explicit)
		if !reflect.DeepEqual(got, c.want) || capped != c.capped {
			t.Errorf("%s: %v capped=%v, want %v capped=%v", c.name, got, capped, c.want, c.capped)
		}
	}
}

// fakeIssuer is a Vault PKI mount with one issuer ending at end: it
// answers the issuer's JSON and signs CSRs, recording each request, and
// refuses, as Vault does, a certificate that would outlive the issuer.
type fakeIssuer struct {
	end   time.Time
	noAPI bool // a Vault before issuers: no issuer/REF/json
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey
	mu    sync.Mutex
	reqs  []map[string]any
}

func newFakeIssuer(t *testing.T, end time.Time) *fakeIssuer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tyc kubernetes CA"}, NotBefore: end.Add(-8760 * time.Hour), NotAfter: end,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &fakeIssuer{end: end, ca: ca, key: k}
}

func (f *fakeIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/v1/")
	answer := func(data map[string]any) { _ = json.NewEncoder(w).Encode(map[string]any{"data": data}) }
	refuse := func(code int, msg string) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{msg}})
	}
	switch {
	case p == "pki/issuer/issuer-1/json" && !f.noAPI:
		answer(map[string]any{"certificate": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.ca.Raw}))})
	case p == "pki/issuer/issuer-1/sign-verbatim/kubernetes":
		var req map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		notAfter := time.Now().Add(time.Hour)
		if na, ok := req["not_after"].(string); ok {
			if _, both := req["ttl"]; both {
				refuse(http.StatusBadRequest, "Either ttl or not_after should be provided. Both should not be provided in the same request.")
				return
			}
			notAfter, _ = time.Parse(time.RFC3339, na)
		} else if ttl, ok := req["ttl"].(string); ok {
			d, _ := time.ParseDuration(ttl)
			notAfter = time.Now().Add(d)
		}
		if notAfter.After(f.end) {
			refuse(http.StatusBadRequest, "cannot satisfy request, as TTL would result in notAfter of "+notAfter.UTC().Format(time.RFC3339Nano)+" that is beyond the expiration of the CA certificate at "+f.end.UTC().Format(time.RFC3339Nano))
			return
		}
		block, _ := pem.Decode([]byte(req["csr"].(string)))
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: csr.Subject,
			NotBefore: time.Now(), NotAfter: notAfter}, f.ca, csr.PublicKey, f.key)
		if err != nil {
			refuse(http.StatusInternalServerError, err.Error())
			return
		}
		answer(map[string]any{"certificate": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))})
	default:
		refuse(http.StatusNotFound, "no handler for "+p)
	}
}

// A renewal from an issuer that ends in 100 hours asks for a certificate
// ending with it, not a year (which Vault refuses); one that ends later
// asks for the ttl; an issuer that has ended signs nothing.
func TestIssueCertNeverOutlivesItsIssuer(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "test-token")
	end := time.Now().Add(100 * time.Hour).Truncate(time.Second)
	f := newFakeIssuer(t, end)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	a := &Activities{}
	in := vault.IssueCertInput{Vault: target.Vault{Address: srv.URL}, CommonName: "kube-apiserver", AltNames: []string{"api.example"}, Issuer: "issuer-1", TTL: "8760h", Verbatim: true}

	res, err := a.IssueCert(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Capped || res.NotAfter != end.UTC().Format(time.RFC3339) {
		t.Errorf("renewed to %s capped=%v, want %s (the issuer's end)", res.NotAfter, res.Capped, end.UTC().Format(time.RFC3339))
	}
	if got := f.reqs[len(f.reqs)-1]; got["not_after"] != end.UTC().Format(time.RFC3339) || got["ttl"] != nil {
		t.Errorf("request: not_after %v ttl %v", got["not_after"], got["ttl"])
	}

	// A short certificate is asked by its ttl.
	in.TTL = "10m"
	if res, err := a.IssueCert(t.Context(), in); err != nil || res.Capped || f.reqs[len(f.reqs)-1]["ttl"] != "10m" {
		t.Errorf("10m: %+v %v %v", res, err, f.reqs[len(f.reqs)-1])
	}

	// A notAfter asked caps it further.
	in.TTL, in.NotAfter = "8760h", end.Add(-50*time.Hour).UTC().Format(time.RFC3339)
	if res, err := a.IssueCert(t.Context(), in); err != nil || !res.Capped || res.NotAfter != in.NotAfter {
		t.Errorf("notAfter asked: %+v %v", res, err)
	}
	in.NotAfter = ""

	// No issuer API to read (an old Vault): asked as before.
	f.noAPI = true
	in.TTL = "1h"
	if res, err := a.IssueCert(t.Context(), in); err != nil || res.Capped || f.reqs[len(f.reqs)-1]["ttl"] != "1h" {
		t.Errorf("no issuer API: %+v %v", res, err)
	}
	f.noAPI = false

	// An issuer that has ended signs nothing that is valid.
	ended := newFakeIssuer(t, time.Now().Add(-time.Hour))
	srv2 := httptest.NewServer(ended)
	t.Cleanup(srv2.Close)
	in.Vault.Address = srv2.URL
	_, err = a.IssueCert(t.Context(), in)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.IssuerEnded) || !ae.NonRetryable() || !strings.Contains(err.Error(), "ca-rotation") {
		t.Errorf("ended issuer: %v", err)
	}
	if len(ended.reqs) != 0 {
		t.Errorf("an ended issuer was asked to sign: %v", ended.reqs)
	}
}
