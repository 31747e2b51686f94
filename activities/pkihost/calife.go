package pkihost

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"

	"kedge.dev/kedge/actions/pki"
)

// CARotationRunbook rotates a cluster's CA (a later issue): what
// cert-renewal's refusal names.
const CARotationRunbook = "ca-rotation"

// CheckCALife refuses a renewal whose CA ends within its window
// (pki.check-ca-life): a certificate renewed from such a CA cannot
// outlive it (Vault refuses a notAfter past its CA's), so it would end
// within the window, due again at once, and the cluster would still stop
// when the CA ends. Run before anything changes, it fails, not retried
// (CAWithinRenewalWindow), naming each such CA, when it ends, and the CA
// rotation runbook to run first.
func CheckCALife(_ context.Context, in pki.CheckCALifeInput) (pki.CheckCALifeResult, error) {
	threshold, err := duration(in.Threshold, 720*time.Hour)
	if err != nil {
		return pki.CheckCALifeResult{}, err
	}
	if len(in.CAs) == 0 {
		return pki.CheckCALifeResult{}, invalid("cas: name at least one CA")
	}
	now := time.Now()
	var res pki.CheckCALifeResult
	var refusals []string
	for i, named := range in.CAs {
		c, err := firstCert([]byte(named.Certificate))
		if err != nil {
			return res, invalid(fmt.Sprintf("cas[%d] (%s): %v", i, named.Name, err))
		}
		res.CAs = append(res.CAs, pki.CALife{Name: named.Name, Subject: c.Subject.CommonName, NotAfter: c.NotAfter.UTC().Format(time.RFC3339)})
		if c.NotAfter.Before(now.Add(threshold)) {
			refusals = append(refusals, caEnds(named.Name, c, now))
		}
	}
	if len(refusals) > 0 {
		return res, windowError(refusals, threshold, "Nothing was renewed and no host was changed")
	}
	return res, nil
}

// CAWithinWindow is the refusal of a renewal on node from ca when ca ends
// within the window, else nil.
func CAWithinWindow(name string, ca *x509.Certificate, now time.Time, threshold time.Duration, node string) error {
	if !ca.NotAfter.Before(now.Add(threshold)) {
		return nil
	}
	return windowError([]string{caEnds(name, ca, now)}, threshold, "Nothing was renewed on "+node)
}

func caEnds(name string, ca *x509.Certificate, now time.Time) string {
	verb := "ends"
	if !ca.NotAfter.After(now) {
		verb = "ended"
	}
	return fmt.Sprintf("%s %q %s %s", name, ca.Subject.CommonName, verb, ca.NotAfter.UTC().Format(time.RFC3339))
}

func windowError(refusals []string, threshold time.Duration, done string) error {
	msg := fmt.Sprintf("%s, within the renewal window (threshold %s): no certificate can outlive the CA that issues it, "+
		"so what is renewed would be due again at once and the cluster still stops when the CA ends. %s. "+
		"The CA must be rotated first: run the CA rotation runbook (%s), then cert-renewal",
		strings.Join(refusals, "; "), short(threshold), done, CARotationRunbook)
	return temporal.NewNonRetryableApplicationError(msg, errtype.CAWithinRenewalWindow, nil)
}

// short is d as one writes it: 720h, not 720h0m0s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
