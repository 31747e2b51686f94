package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// WaitPodTokensAction is the action name of WaitPodTokens.
const WaitPodTokensAction = "host.wait-pod-tokens"

// WaitPodTokensInput names the service-account key about to be dropped.
type WaitPodTokensInput struct {
	Target target.SSH `json:"target"`
	// OldPublicKey is the PEM public key whose tokens must be gone.
	OldPublicKey string `json:"oldPublicKey" kedge:"required" doc:"the service-account public key about to be dropped (PEM): no pod's projected token on the host may be signed by it"`
	// Wait is how long the host's pods get to have their tokens renewed
	// (their kubelet renews a projected token at 80% of its life); "" or
	// 0 checks once.
	Wait string `json:"wait,omitempty" doc:"how long to wait for the kubelet to renew the tokens (at most 2h50m); 0 checks once"`
}

// WaitPodTokensResult says what was found on the host.
type WaitPodTokensResult struct {
	// Tokens is how many projected tokens the host's pods mount.
	Tokens int `json:"tokens"`
	// KeyID is the old key's key ID, as the API server writes it into a
	// token's header.
	KeyID string `json:"keyID"`
	// OldKey are the UIDs of the pods whose token the old key signed
	// (empty on success).
	OldKey []string `json:"oldKey"`
}

func init() {
	spec.Register(spec.Row{Name: WaitPodTokensAction, Doc: "wait until no pod on the host mounts a projected service-account token signed by the old key (only each token's header, which names its key, leaves the host); on timeout fails (OldKeyInUse, not retried) naming the pods' UIDs",
		In: WaitPodTokensInput{}, Out: WaitPodTokensResult{}, Timeout: 3 * time.Hour,
		Summary: `wait for the pods' tokens to come from the new key{{.On}}`})
}
