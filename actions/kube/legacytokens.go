package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// LegacyTokensAction lists the service-account token Secrets a key
// signed.
const LegacyTokensAction = "kube.legacy-tokens"

// LegacyTokensInput names the key.
type LegacyTokensInput struct {
	Cluster   target.Kube `json:"cluster"`
	PublicKey string      `json:"publicKey" kedge:"required" doc:"the service-account public key (PEM) whose token Secrets to list"`
}

// LegacyTokensResult lists them as namespace/name (service account).
type LegacyTokensResult struct {
	// SignedBy are the token Secrets the key signed: they stop working
	// when it is dropped, and are not renewed by anyone.
	SignedBy []string `json:"signedBy"`
	// Total is how many token Secrets the cluster has.
	Total int `json:"total"`
}

func init() {
	spec.Register(spec.Row{Name: LegacyTokensAction, Doc: "list the legacy service-account token Secrets (kubernetes.io/service-account-token) the key signed: nothing renews them, so they stop working when the key is dropped (only each token's header is read)",
		In: LegacyTokensInput{}, Out: LegacyTokensResult{}, Timeout: 3 * time.Minute,
		Summary: `list the token Secrets the old service-account key signed`})
}
