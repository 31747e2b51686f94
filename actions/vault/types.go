package vault

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// Action names.
const (
	IssueCertAction  = "vault.issue-cert"
	ReadSecretAction = "vault.read-secret"
)

// IssueCertInput asks the PKI engine for a certificate.
type IssueCertInput struct {
	Vault      target.Vault `json:"vault"`
	CommonName string       `json:"commonName" kedge:"required" doc:"the certificate's CN, e.g. system:node:worker-1"`
	AltNames   []string     `json:"altNames,omitempty" doc:"DNS subject alternative names"`
	IPSANs     []string     `json:"ipSANs,omitempty" doc:"IP subject alternative names"`
	// SANs takes addresses as inventories give them, names or IPs alike
	// (bare-metal Typhoon names its hosts by DNS name).
	SANs []string `json:"sans,omitempty" doc:"subject alternative names of either kind, e.g. a host's address from the inventory: each IP address goes in the IP SANs, each DNS name in the DNS SANs"`
	TTL  string   `json:"ttl,omitempty" kedge:"duration" doc:"lifetime (default: the role's)"`
	Role string   `json:"role,omitempty" doc:"PKI role (default: the inventory's vault.role, else kubernetes)"`
	// Organization sets the subject's O (Kubernetes groups, e.g.
	// system:masters). Vault's issue endpoint cannot, so the key is made
	// on the worker and Vault signs its CSR verbatim.
	Organization []string `json:"organization,omitempty" doc:"subject organizations, i.e. Kubernetes groups such as system:masters"`
	Issuer       string   `json:"issuer,omitempty" doc:"the PKI issuer to sign with (default: the mount's default), e.g. vault.cluster-ca's issuer"`
	// Verbatim signs a CSR naming exactly this subject and these SANs
	// (sign-verbatim), as a renewal in place needs.
	Verbatim bool `json:"verbatim,omitempty" doc:"sign exactly this subject and these SANs (sign-verbatim), e.g. to renew a certificate Kedge did not issue"`
	// NotAfter caps the certificate's end. Whatever is asked, a
	// certificate never ends after its issuer: a ttl that would outlive
	// it is asked as not_after at the issuer's end.
	NotAfter string `json:"notAfter,omitempty" doc:"the latest the certificate may end, RFC 3339 (a ttl reaching past it is cut to it); it never ends after its issuer in any case"`
}

// IssueCertResult is the issued certificate. PrivateKey is sealed by the
// payload codec in Temporal; write it with host.write-file mode 0600.
type IssueCertResult struct {
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"privateKey"`
	CA          string `json:"ca"`
	Serial      string `json:"serial"`
	NotAfter    string `json:"notAfter"`
	// Capped says the certificate ends at its issuer's end (or the
	// notAfter asked), not after the ttl.
	Capped bool `json:"capped"`
}

// ReadSecretInput reads one KV v2 secret.
type ReadSecretInput struct {
	Vault   target.Vault `json:"vault"`
	Path    string       `json:"path" kedge:"required" doc:"secret path under the KV mount, e.g. kubernetes/encryption"`
	Version int          `json:"version,omitempty" doc:"version to read (default: the latest)"`
}

// ReadSecretResult is the secret's data, each value as a string.
type ReadSecretResult struct {
	Data    map[string]string `json:"data"`
	Version int               `json:"version"`
}

func init() {
	spec.Register(spec.Row{Name: IssueCertAction, Doc: "issue a certificate and private key from the cluster's Vault PKI (the key stays sealed in Temporal)",
		In: IssueCertInput{}, Out: IssueCertResult{}, Timeout: time.Minute,
		Summary: `issue a certificate for {{.In "commonName"}}`})
}

func init() {
	spec.Register(spec.Row{Name: ReadSecretAction, Doc: "read a KV v2 secret from the cluster's Vault",
		In: ReadSecretInput{}, Out: ReadSecretResult{}, Timeout: time.Minute,
		Summary: `read secret {{.In "path"}}`})
}
