package certinfo

import (
	"time"

	"kedge.dev/kedge/actions/spec"
)

// CheckAction is the action name of Check.
const CheckAction = "tls.check"

// CheckInput names a TLS endpoint.
type CheckInput struct {
	Address   string `json:"address" kedge:"required" doc:"host:port of the TLS endpoint, e.g. 10.0.0.11:6443"`
	Threshold string `json:"threshold,omitempty" kedge:"duration" doc:"the certificate is due when it ends within this (default 720h)"`
	Timeout   string `json:"timeout,omitempty" kedge:"duration" doc:"give up connecting after this long (default 10s)"`
	// NewerThan makes Check wait until the endpoint serves a certificate
	// ending after this time: after a renewal, until the restarted
	// server serves the new certificate.
	NewerThan string `json:"newerThan,omitempty" doc:"wait until the served certificate ends after this RFC 3339 time (e.g. the notAfter seen before a renewal)"`
	// NotSerial makes Check wait until the endpoint serves a certificate
	// other than this one (hex serial): after a renewal whose new
	// certificate ends no later than the old (capped at its CA's end).
	NotSerial string `json:"notSerial,omitempty" doc:"wait until the served certificate's serial (hex) is not this one (e.g. the serial seen before a renewal)"`
	Wait      string `json:"wait,omitempty" kedge:"duration" doc:"how long to wait for newerThan or notSerial (default 5m)"`
	// CA, when set, is the CA (PEM) the served certificate must chain
	// to: the check fails, not retried, when it does not.
	CA string `json:"ca,omitempty" doc:"PEM CA certificate(s) the served certificate must chain to (fails with CertificateUntrusted otherwise)"`
}

// CheckResult is the certificate the endpoint serves.
type CheckResult struct {
	Address  string `json:"address"`
	Subject  string `json:"subject"`
	Issuer   string `json:"issuer"`
	Serial   string `json:"serial"`
	NotAfter string `json:"notAfter"`
	Due      bool   `json:"due"`
	// Trusted is set when the step named a CA and the certificate chains
	// to it.
	Trusted bool `json:"trusted"`
}

func init() {
	spec.Register(spec.Row{Name: CheckAction, Doc: "connect to a TLS endpoint and report the certificate it serves (and whether it is due for renewal); optionally wait until it serves a newer one",
		In: CheckInput{}, Out: CheckResult{}, Timeout: 10 * time.Minute,
		Summary: `check the certificate served at {{.In "address"}}`})
}
