package vault

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// PromoteCAAction makes a staged CA (or key pair) the one in use (a CA
// rotation's last stage, in Vault).
const PromoteCAAction = "vault.promote-ca"

// PromoteCAInput names the record in use; its successor is at PATH-next.
type PromoteCAInput struct {
	Vault target.Vault `json:"vault"`
	Path  string       `json:"path" kedge:"required" doc:"KV path of the CA (vault.cluster-ca) or key pair (vault.key-pair) in use, e.g. kedge/clusters/mercury/ca; its successor is at PATH-next, the one it replaces goes to PATH-previous"`
}

// PromoteCAResult says what is in use now. Issuer and PreviousIssuer are
// empty for a key pair.
type PromoteCAResult struct {
	Issuer         string `json:"issuer"`
	PreviousIssuer string `json:"previousIssuer"`
	// Changed is false when a run before promoted it (nothing was left
	// to do).
	Changed bool `json:"changed"`
	// DefaultIssuer is set when the old issuer was the PKI mount's
	// default and the new one is now.
	DefaultIssuer bool `json:"defaultIssuer"`
}

// PreviousPath is where the record a rotation replaced is kept.
func PreviousPath(path string) string { return path + "-previous" }

func init() {
	spec.Register(spec.Row{Name: PromoteCAAction, Doc: "make the CA (or key pair) staged at PATH-next the one in use at PATH (a CA rotation's last stage in Vault): the old record kept at PATH-previous, PATH-next deleted, the old issuer kept in the PKI mount and, when it was the mount's default, the new one made the default; a run again after the move changes nothing; refused when nothing is staged and PATH was not promoted",
		In: PromoteCAInput{}, Out: PromoteCAResult{}, Timeout: time.Minute,
		Summary: `promote the CA staged to replace {{.In "path"}}`})
}
