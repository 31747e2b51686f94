package certinfo

import (
	"time"

	"kedge.dev/kedge/actions/spec"
)

// ScanCAAction is the action name of ScanCA.
const ScanCAAction = "certinfo.scan-ca"

// NamedCA is a CA to look for, by the name the scan reports it under.
type NamedCA struct {
	Name        string `json:"name"`
	Certificate string `json:"certificate"` // PEM; with several certificates, any of them
}

// ScanCAInput names the endpoints to scan and the CAs to tell apart.
type ScanCAInput struct {
	Endpoints []string  `json:"endpoints" kedge:"required" doc:"host:port of every TLS endpoint to scan, e.g. 10.0.0.11:6443, 10.0.0.11:2379, 10.0.0.21:10250"`
	CAs       []NamedCA `json:"cas,omitempty" doc:"the CAs to look for, each {name, certificate (PEM)}: a served certificate is reported under the name of the CA whose key signed it (required unless expiresWithin is given)"`
	// Refuse names CAs (among CAs) no endpoint may still present.
	Refuse  []string `json:"refuse,omitempty" doc:"names among cas: fail, not retried, when any endpoint presents a certificate signed by one of them (e.g. the old CA before it is dropped)"`
	Timeout string   `json:"timeout,omitempty" kedge:"duration" doc:"give up connecting to one endpoint after this long (default 10s)"`
	// ExpiresWithin refuses certificates that end too soon: a change
	// that restarts the servers must not meet one running out.
	ExpiresWithin string `json:"expiresWithin,omitempty" kedge:"duration" doc:"fail, not retried (CertificateExpiring), when any endpoint presents a certificate ending within this long, naming each"`
}

// ScannedEndpoint is what one endpoint presents. CA is the name of the
// CA among the scan's that signed it, "self-signed", or empty (another
// CA); Error says why the endpoint could not be scanned.
type ScannedEndpoint struct {
	Endpoint string `json:"endpoint"`
	Subject  string `json:"subject,omitempty"`
	Issuer   string `json:"issuer,omitempty"`
	NotAfter string `json:"notAfter,omitempty"`
	Serial   string `json:"serial,omitempty"`
	CA       string `json:"ca"`
	Error    string `json:"error,omitempty"`
}

// ScanCAResult is every endpoint, in the order given, and the endpoints
// presenting each CA's certificates, by the CA's name.
type ScanCAResult struct {
	Endpoints  []ScannedEndpoint   `json:"endpoints"`
	Presenting map[string][]string `json:"presenting"`
}

// SelfSigned is the CA reported for a certificate that signs itself.
const SelfSigned = "self-signed"

func init() {
	spec.Register(spec.Row{Name: ScanCAAction, Doc: "ask every TLS endpoint which certificate it presents and which of the CAs given signed it (directly or through the intermediates presented), trusting nothing and reading the chain even where a client certificate is then demanded (etcd); refuse, not retried, when any presents a CA named in refuse, naming each with its subject and issuer; an endpoint that cannot be scanned fails it (retried): it is not known clean",
		In: ScanCAInput{}, Out: ScanCAResult{}, Timeout: 10 * time.Minute,
		Summary: `scan {{.Count "endpoints" "endpoint"}} for the CA they present`})
}
