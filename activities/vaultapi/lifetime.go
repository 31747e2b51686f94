package vaultapi

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"

	"kedge.dev/kedge/actions/vault"
)

// lifetime is what to ask Vault for a certificate that should last ttl (0:
// the role's) and must not end after limit (zero: no limit known): the
// ttl, or, when the ttl would outlive the limit, not_after at the limit
// (Vault refuses a notAfter beyond its CA's, and takes either, not both).
// explicit says the limit was asked for, not only the issuer's: then it
// applies even with the role's ttl.
func lifetime(now time.Time, ttl time.Duration, ttlText string, limit time.Time, explicit bool) (params map[string]any, capped bool) {
	params = map[string]any{}
	switch {
	case limit.IsZero():
	case ttl == 0 && explicit:
		return map[string]any{"not_after": vaultTime(limit)}, true
	case ttl > 0 && now.Add(ttl).After(limit):
		return map[string]any{"not_after": vaultTime(limit)}, true
	}
	if ttlText != "" {
		params["ttl"] = ttlText
	}
	return params, false
}

// vaultTime is t as Vault's not_after takes it (UTC, whole seconds: a
// certificate's times have no finer part).
func vaultTime(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

// issuerNotAfter reads when the issuer ends from Vault (its certificate at
// MOUNT/issuer/REF/json, which Vault serves to anyone); zero when the mount
// has no such issuer API (Vault before 1.11).
func issuerNotAfter(ctx context.Context, cl *vaultapi.Client, mount, issuer string) (time.Time, *x509.Certificate, error) {
	ref := issuer
	if ref == "" {
		ref = "default"
	}
	p := mount + "/issuer/" + ref + "/json"
	sec, err := cl.Logical().ReadWithContext(ctx, p)
	var re *vaultapi.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound || err == nil && sec == nil {
		return time.Time{}, nil, nil
	}
	if err != nil {
		return time.Time{}, nil, classify("read issuer "+p, err)
	}
	s, _ := sec.Data["certificate"].(string)
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return time.Time{}, nil, temporal.NewApplicationError("read issuer "+p+": no certificate in the answer", errtype.Vault)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, nil, temporal.NewApplicationError("read issuer "+p+": "+err.Error(), errtype.Vault)
	}
	return c.NotAfter, c, nil
}

// leafLifetime is the lifetime to ask for in.TTL, never beyond the
// issuer's end nor in.NotAfter.
func leafLifetime(ctx context.Context, cl *vaultapi.Client, mount string, in vault.IssueCertInput) (map[string]any, bool, error) {
	var ttl time.Duration
	if in.TTL != "" {
		d, err := time.ParseDuration(in.TTL)
		if err != nil || d <= 0 {
			return nil, false, invalid(fmt.Sprintf("ttl %q is not a positive duration", in.TTL))
		}
		ttl = d
	}
	var limit time.Time
	if in.NotAfter != "" {
		t, err := time.Parse(time.RFC3339, in.NotAfter)
		if err != nil {
			return nil, false, invalid(fmt.Sprintf("notAfter %q is not an RFC 3339 time", in.NotAfter))
		}
		limit = t
	}
	if ttl == 0 && limit.IsZero() {
		return map[string]any{}, false, nil
	}
	end, ca, err := issuerNotAfter(ctx, cl, mount, in.Issuer)
	if err != nil {
		return nil, false, err
	}
	now := time.Now()
	if !end.IsZero() && !end.After(now) {
		return nil, false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the issuer %q ended %s: it can sign nothing that is valid; rotate the CA first (the ca-rotation runbook)",
			ca.Subject.CommonName, end.UTC().Format(time.RFC3339)), errtype.IssuerEnded, nil)
	}
	if !limit.IsZero() && !limit.After(now) {
		return nil, false, invalid(fmt.Sprintf("notAfter %s has passed", in.NotAfter))
	}
	explicit := !limit.IsZero()
	if limit.IsZero() || !end.IsZero() && end.Before(limit) {
		limit = end
	}
	params, capped := lifetime(now, ttl, in.TTL, limit, explicit)
	return params, capped, nil
}
