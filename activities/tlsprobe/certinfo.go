package tlsprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/certinfo"
	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/certfile"
	"kedge.dev/kedge/internal/resume"
)

// Check connects to a TLS endpoint and reports the leaf certificate it
// presents (tls.check). It trusts nothing and sends no client
// certificate: it only reads what is served, even from endpoints that
// then refuse it for lacking one (etcd).
func Check(ctx context.Context, in certinfo.CheckInput) (certinfo.CheckResult, error) {
	threshold, err := duration(in.Threshold, certfile.DefaultThreshold)
	if err != nil {
		return certinfo.CheckResult{}, err
	}
	timeout, err := duration(in.Timeout, 10*time.Second)
	if err != nil {
		return certinfo.CheckResult{}, err
	}
	if _, _, err := net.SplitHostPort(in.Address); err != nil {
		return certinfo.CheckResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("address %q is not host:port", in.Address), errtype.InvalidInput, nil)
	}
	var roots *x509.CertPool
	if strings.TrimSpace(in.CA) != "" {
		cas, err := certfile.Parse([]byte(in.CA))
		if err != nil {
			return certinfo.CheckResult{}, temporal.NewNonRetryableApplicationError("ca: "+err.Error(), errtype.InvalidInput, err)
		}
		roots = x509.NewCertPool()
		for _, c := range cas {
			roots.AddCert(c)
		}
	}
	if in.NewerThan == "" && in.NotSerial == "" {
		res, leaf, err := probe(ctx, in.Address, threshold, timeout)
		if err == nil {
			err = verify(&res, leaf, roots)
		}
		return res, err
	}
	var newer time.Time
	if in.NewerThan != "" {
		if newer, err = time.Parse(time.RFC3339, in.NewerThan); err != nil {
			return certinfo.CheckResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("newerThan %q is not an RFC 3339 time", in.NewerThan), errtype.InvalidInput, nil)
		}
	}
	want := "ending after " + in.NewerThan
	if in.NewerThan == "" {
		want = "other than serial " + in.NotSerial
	}
	wait, err := duration(in.Wait, 5*time.Minute)
	if err != nil {
		return certinfo.CheckResult{}, err
	}
	// A wait a lost worker began keeps its deadline.
	prog := waitProgress{StartedAt: resume.StartedAt(ctx)}
	deadline := prog.StartedAt.Add(wait)
	for {
		res, leaf, err := probe(ctx, in.Address, threshold, timeout)
		last := ""
		if err == nil {
			na, _ := time.Parse(time.RFC3339, res.NotAfter)
			if (in.NewerThan == "" || na.After(newer)) && (in.NotSerial == "" || !strings.EqualFold(res.Serial, in.NotSerial)) {
				err := verify(&res, leaf, roots)
				return res, err
			}
			last = "still serves the certificate " + res.Serial + " ending " + res.NotAfter
		} else {
			last = err.Error()
		}
		if activity.IsActivity(ctx) {
			prog.Last = last
			activity.RecordHeartbeat(ctx, prog)
		}
		if time.Now().After(deadline) {
			return res, temporal.NewApplicationError(fmt.Sprintf("%s: no certificate %s within %s: %s", in.Address, want, wait, last), errtype.CertificateNotRenewed)
		}
		select {
		case <-ctx.Done():
			return res, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(time.Second):
		}
	}
}

// waitProgress is a waiting tls.check's heartbeat: when it began waiting
// and what the endpoint served last.
type waitProgress struct {
	StartedAt time.Time `json:"startedAt"`
	Last      string    `json:"last,omitempty"`
}

// probe reads the leaf certificate address serves and returns its
// description and the certificate itself, which only verify reads: it
// never leaves the worker.
func probe(ctx context.Context, address string, threshold, timeout time.Duration) (certinfo.CheckResult, *x509.Certificate, error) {
	var leaf *x509.Certificate
	cfg := &tls.Config{
		InsecureSkipVerify: true, // we read the certificate; we do not trust the endpoint
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				leaf, _ = x509.ParseCertificate(raw[0])
			}
			return nil
		},
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(dctx, "tcp", address)
	if conn != nil {
		conn.Close()
	}
	if leaf == nil {
		if err == nil {
			err = errors.New("no certificate presented")
		}
		return certinfo.CheckResult{}, nil, temporal.NewApplicationErrorWithCause(fmt.Sprintf("TLS to %s: %v", address, err), errtype.EndpointUnreachable, err)
	}
	c := certfile.Describe(leaf, time.Now(), threshold)
	return certinfo.CheckResult{Address: address, Subject: c.Subject, Issuer: c.Issuer, Serial: c.Serial, NotAfter: c.NotAfter, Due: c.Due}, leaf, nil
}

// verify checks the served certificate leaf chains to roots (when
// given). The name is not checked: the step reaches the endpoint by the
// address it was given, which a certificate need not name.
func verify(res *certinfo.CheckResult, leaf *x509.Certificate, roots *x509.CertPool) error {
	if roots == nil || leaf == nil {
		return nil
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s serves %q issued by %q, which does not chain to the CA given: %v",
			res.Address, res.Subject, res.Issuer, err), errtype.CertificateUntrusted, err)
	}
	res.Trusted = true
	return nil
}

func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%q is not a duration", s), errtype.InvalidInput, nil)
	}
	return d, nil
}
