package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// CheckServiceAccountKeyAction is the action name of
// CheckServiceAccountKey.
const CheckServiceAccountKeyAction = "kube.check-service-account-key"

// CheckServiceAccountKeyInput names the public key the API server should
// sign service-account tokens with.
type CheckServiceAccountKeyInput struct {
	Cluster   target.Kube `json:"cluster"`
	PublicKey string      `json:"publicKey" kedge:"required" doc:"PEM public key (e.g. the controllers' service-account.pub)"`
	Namespace string      `json:"namespace,omitempty" doc:"namespace of the service account a short token is requested for (default: default)"`
	Account   string      `json:"serviceAccount,omitempty" doc:"service account (default: default)"`
}

// CheckServiceAccountKeyResult says how the token was signed.
type CheckServiceAccountKeyResult struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"keyID"`
}

func init() {
	spec.Register(spec.Row{Name: CheckServiceAccountKeyAction, Doc: "check the API server signs service-account tokens with this key: a 10-minute token is requested and its signature verified (fails with ServiceAccountKeyMismatch otherwise)",
		In: CheckServiceAccountKeyInput{}, Out: CheckServiceAccountKeyResult{}, Timeout: 30 * time.Second,
		Summary: `check the service-account signing key`})
}
