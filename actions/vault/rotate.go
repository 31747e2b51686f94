package vault

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// StageCAAction makes the CA that replaces one of the cluster's (the
// first stage of a CA rotation).
const StageCAAction = "vault.stage-ca"

// StageCAInput names the CA to replace and how to make its successor.
type StageCAInput struct {
	Vault      target.Vault `json:"vault"`
	Path       string       `json:"path" kedge:"required" doc:"KV path that keeps the CA in use, e.g. kedge/clusters/mercury/ca; the new one is kept at PATH-next"`
	CommonName string       `json:"commonName" kedge:"required" doc:"the new CA's CN, e.g. mercury kubernetes CA 2026"`
	TTL        string       `json:"ttl,omitempty" kedge:"duration" doc:"the new CA's lifetime (default 87600h)"`
	KeyInVault bool         `json:"keyInVault,omitempty" doc:"the new CA's key is made inside Vault and never leaves it (etcd's CA); the CA in use must be kept the same way"`
}

// StageCAResult is the new CA beside the one in use. PrivateKey (empty
// with keyInVault) is sealed by the payload codec in Temporal. Bundle is
// what a trust point holds while both are trusted, the CA in use first.
// It is never a signer's certificate file: Kubernetes' CSR signer takes
// exactly one certificate (docs/ca-rotation.md).
type StageCAResult struct {
	Certificate    string `json:"certificate"`
	PrivateKey     string `json:"privateKey"`
	Issuer         string `json:"issuer"`
	OldCertificate string `json:"oldCertificate"`
	OldIssuer      string `json:"oldIssuer"`
	Bundle         string `json:"bundle"`
	// Created is false when a run before made it: the same new CA is
	// returned, never a second one.
	Created bool `json:"created"`
}

// NextPath is where a CA's successor is kept while it is rotated in.
func NextPath(path string) string { return path + "-next" }

func init() {
	spec.Register(spec.Row{Name: StageCAAction, Doc: "the CA that is to replace one of the cluster's (a CA rotation's first stage): a new issuer in the same PKI mount, kept at PATH-next beside the CA in use, which does not change; made once, returned again to a resumed run; with the bundle (in use first, then new) that trust points hold while both are trusted",
		In: StageCAInput{}, Out: StageCAResult{}, Timeout: time.Minute,
		Summary: `stage the CA that replaces {{.In "path"}}`})
}
