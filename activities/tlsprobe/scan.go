package tlsprobe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/certinfo"
	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/certfile"
)

// scanParallel bounds how many endpoints are dialled at once.
const scanParallel = 8

// namedCA is a CA of the scan, parsed.
type namedCA struct {
	name  string
	certs []*x509.Certificate
}

// ScanCA asks every endpoint which certificate it presents and which of
// the CAs given signed it (certinfo.scan-ca): before a CA is dropped,
// where it is still presented. Like tls.check it trusts nothing and sends
// no client certificate: the chain is read during the handshake, so an
// endpoint that then refuses the client for lacking one (etcd) is still
// scanned. An endpoint that cannot be scanned is not known clean: the
// action fails (retried) naming it. An endpoint presenting a certificate
// of a CA named in Refuse fails it, not retried, naming each.
func ScanCA(ctx context.Context, in certinfo.ScanCAInput) (certinfo.ScanCAResult, error) {
	timeout, err := duration(in.Timeout, 10*time.Second)
	if err != nil {
		return certinfo.ScanCAResult{}, err
	}
	cas, refuse, err := scanCAs(in)
	if err != nil {
		return certinfo.ScanCAResult{}, err
	}
	var due time.Time // certificates ending before it are refused
	if in.ExpiresWithin != "" {
		window, err := duration(in.ExpiresWithin, 0)
		if err != nil {
			return certinfo.ScanCAResult{}, err
		}
		due = time.Now().Add(window)
	}
	rows := make([]certinfo.ScannedEndpoint, len(in.Endpoints))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
	)
	slots := make(chan struct{}, scanParallel)
	for i, e := range in.Endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			rows[i] = scanOne(ctx, e, cas, timeout)
			mu.Lock()
			defer mu.Unlock()
			done++
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, scanProgress{Scanned: done, Of: len(in.Endpoints), Last: e})
			}
		}()
	}
	wg.Wait()
	return verdict(rows, cas, refuse, due)
}

// scanProgress is a scan's heartbeat.
type scanProgress struct {
	Scanned int    `json:"scanned"`
	Of      int    `json:"of"`
	Last    string `json:"last"`
}

// scanCAs checks the input and parses its CAs; refuse is the set of
// names to refuse.
func scanCAs(in certinfo.ScanCAInput) ([]namedCA, map[string]bool, error) {
	bad := func(msg string) error {
		return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
	}
	if len(in.Endpoints) == 0 {
		return nil, nil, bad("endpoints are required")
	}
	for _, e := range in.Endpoints {
		if _, _, err := net.SplitHostPort(e); err != nil {
			return nil, nil, bad(fmt.Sprintf("endpoint %q is not host:port", e))
		}
	}
	if len(in.CAs) == 0 && in.ExpiresWithin == "" {
		return nil, nil, bad("cas are required (or expiresWithin, to check only how long certificates last)")
	}
	var cas []namedCA
	for _, c := range in.CAs {
		switch {
		case strings.TrimSpace(c.Name) == "":
			return nil, nil, bad("every CA needs a name")
		case c.Name == certinfo.SelfSigned:
			return nil, nil, bad(fmt.Sprintf("%q names self-signed certificates; call the CA otherwise", certinfo.SelfSigned))
		case slices.ContainsFunc(cas, func(n namedCA) bool { return n.name == c.Name }):
			return nil, nil, bad(fmt.Sprintf("two CAs are named %q", c.Name))
		}
		certs, err := certfile.Parse([]byte(c.Certificate))
		if err != nil || !strings.Contains(c.Certificate, "-----BEGIN") {
			return nil, nil, bad(fmt.Sprintf("CA %q: its certificate is not PEM (%v)", c.Name, err))
		}
		cas = append(cas, namedCA{name: c.Name, certs: certs})
	}
	refuse := map[string]bool{}
	for _, r := range in.Refuse {
		if !slices.ContainsFunc(cas, func(n namedCA) bool { return n.name == r }) {
			return nil, nil, bad(fmt.Sprintf("refuse names %q, which is not among the CAs", r))
		}
		refuse[r] = true
	}
	return cas, refuse, nil
}

// scanOne reads the chain endpoint presents and says which CA signed
// it.
func scanOne(ctx context.Context, endpoint string, cas []namedCA, timeout time.Duration) certinfo.ScannedEndpoint {
	row := certinfo.ScannedEndpoint{Endpoint: endpoint}
	var chain []*x509.Certificate
	cfg := &tls.Config{
		InsecureSkipVerify: true, // the chain is read, never trusted
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			chain = nil
			for _, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				chain = append(chain, c)
			}
			return nil
		},
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(dctx, "tcp", endpoint)
	if conn != nil {
		_ = conn.Close()
	}
	// An error after the chain was read is the endpoint refusing a
	// client without a certificate: the scan has what it came for.
	if len(chain) == 0 {
		if err == nil {
			err = errors.New("no certificate presented")
		}
		row.Error = fmt.Sprintf("TLS to %s: %v", endpoint, err)
		return row
	}
	c := certfile.Describe(chain[0], time.Now(), 0)
	row.Subject, row.Issuer, row.NotAfter, row.Serial = c.Subject, c.Issuer, c.NotAfter, c.Serial
	row.CA = signer(chain, cas)
	return row
}

// signer is the name of the CA among cas that signed the chain's leaf,
// directly or through the intermediates presented with it;
// api.SelfSigned for a leaf that signs itself; "" otherwise.
func signer(chain []*x509.Certificate, cas []namedCA) string {
	leaf := chain[0]
	for _, ca := range cas {
		cur := leaf
		for range chain {
			if slices.ContainsFunc(ca.certs, func(c *x509.Certificate) bool { return cur.CheckSignatureFrom(c) == nil }) {
				return ca.name
			}
			i := slices.IndexFunc(chain[1:], func(p *x509.Certificate) bool { return !p.Equal(cur) && cur.CheckSignatureFrom(p) == nil })
			if i < 0 {
				break
			}
			cur = chain[1+i]
		}
	}
	if bytes.Equal(leaf.RawIssuer, leaf.RawSubject) && leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) == nil {
		return certinfo.SelfSigned
	}
	return ""
}

// verdict is the scan's result, or its failure: endpoints presenting a
// refused CA or a certificate ending before due (not retried), or
// endpoints not scanned (retried).
func verdict(rows []certinfo.ScannedEndpoint, cas []namedCA, refuse map[string]bool, due time.Time) (certinfo.ScanCAResult, error) {
	res := certinfo.ScanCAResult{Endpoints: rows, Presenting: map[string][]string{}}
	for _, ca := range cas {
		res.Presenting[ca.name] = []string{}
	}
	var refused, unscanned, expiring []string
	for _, r := range rows {
		if end, err := time.Parse(time.RFC3339, r.NotAfter); err == nil && end.Before(due) {
			expiring = append(expiring, fmt.Sprintf("%s presents %q, which ends %s", r.Endpoint, r.Subject, r.NotAfter))
		}
		switch {
		case r.Error != "":
			unscanned = append(unscanned, r.Error)
		case r.CA != "":
			res.Presenting[r.CA] = append(res.Presenting[r.CA], r.Endpoint)
		}
		if refuse[r.CA] {
			refused = append(refused, fmt.Sprintf("%s presents %q issued by %q (%s)", r.Endpoint, r.Subject, r.Issuer, r.CA))
		}
	}
	notScanned := ""
	if len(unscanned) > 0 {
		notScanned = fmt.Sprintf("%d not scanned, so not known clean: %s", len(unscanned), strings.Join(unscanned, "; "))
	}
	if len(refused) > 0 {
		msg := fmt.Sprintf("%d of %d endpoints still present a certificate of a CA to drop: %s", len(refused), len(rows), strings.Join(refused, "; "))
		if notScanned != "" {
			msg += "; " + notScanned
		}
		return res, temporal.NewNonRetryableApplicationError(msg, errtype.CAStillPresented, nil)
	}
	if len(expiring) > 0 {
		msg := fmt.Sprintf("%d of %d endpoints present a certificate that ends before %s: %s; renew them first (cert-renewal)",
			len(expiring), len(rows), due.UTC().Format(time.RFC3339), strings.Join(expiring, "; "))
		if notScanned != "" {
			msg += "; " + notScanned
		}
		return res, temporal.NewNonRetryableApplicationError(msg, errtype.CertificateExpiring, nil)
	}
	if notScanned != "" {
		return res, temporal.NewApplicationError(fmt.Sprintf("of %d endpoints, %s", len(rows), notScanned), errtype.EndpointUnreachable)
	}
	return res, nil
}
