package nodefiles

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// BootstrapTokenGroup is the group Kedge's bootstrap tokens authenticate as,
// besides system:bootstrappers. Bind RBAC (node-bootstrapper, CSR approval)
// to system:bootstrappers or to this group.
const BootstrapTokenGroup = "system:bootstrappers:kedge"

// BootstrapToken is a bootstrap token a kubelet joins the cluster with (seed
// 000, TLS bootstrap): it authenticates as system:bootstrap:ID in the
// system:bootstrappers groups until Expires, long enough to have its client
// certificate signed.
//
// The token is a credential: it belongs in a bootstrap kubeconfig sent to
// one host and in the Secret that makes the API server accept it, and
// nowhere else. String never prints the secret.
type BootstrapToken struct {
	// ID is the public half, six characters [a-z0-9].
	ID string `json:"id"`
	// TokenSecret is the secret half, sixteen characters [a-z0-9].
	TokenSecret string `json:"secret"`
	// Token is ID.TokenSecret, the bearer token.
	Token string `json:"token"`
	// Expires is when the API server stops accepting the token and the
	// token cleaner deletes its Secret; zero for a standing token, which
	// lasts until its Secret is deleted (Standing).
	Expires time.Time `json:"expires"`
	// Description says what the token was made for.
	Description string `json:"description,omitempty"`
}

// NewBootstrapToken generates a random bootstrap token valid for ttl from
// now.
func NewBootstrapToken(ttl time.Duration, now time.Time, description string) (BootstrapToken, error) {
	if ttl <= 0 {
		return BootstrapToken{}, &FieldError{Field: "ttl", Problem: fmt.Sprintf("%s is not a positive duration", ttl)}
	}
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return BootstrapToken{}, fmt.Errorf("generate bootstrap token: %w", err)
	}
	id, secret, _ := strings.Cut(token, ".")
	return newBootstrapToken(id, secret, now.Add(ttl), description)
}

// newBootstrapToken builds a token from given halves (for NewBootstrapToken,
// and for tests that need the same token every time).
func newBootstrapToken(id, secret string, expires time.Time, description string) (BootstrapToken, error) {
	token := bootstraputil.TokenFromIDAndSecret(id, secret)
	if !bootstraputil.IsValidBootstrapToken(token) {
		return BootstrapToken{}, errors.New("bootstrap token: id or secret not of the form [a-z0-9]{6}.[a-z0-9]{16}")
	}
	var p problems
	if strings.ContainsAny(description, "\n\r") {
		p.add("description", "holds a line break")
	}
	if err := p.err(); err != nil {
		return BootstrapToken{}, err
	}
	return BootstrapToken{
		ID:          id,
		TokenSecret: secret,
		Token:       token,
		Expires:     expires.UTC().Truncate(time.Second),
		Description: description,
	}, nil
}

// Standing is t without an expiry: a node's bootstrap credential, kept
// on the node as Typhoon keeps its cluster's, until its Secret is
// deleted.
func (t BootstrapToken) Standing() BootstrapToken {
	t.Expires = time.Time{}
	return t
}

// String names the token without its secret.
func (t BootstrapToken) String() string {
	if t.Expires.IsZero() {
		return fmt.Sprintf("bootstrap token %s (standing)", t.ID)
	}
	return fmt.Sprintf("bootstrap token %s (expires %s)", t.ID, t.Expires.Format(time.RFC3339))
}

// Secret is the kube-system Secret that makes the API server accept the
// token (--enable-bootstrap-token-auth): usable to authenticate and to sign
// the cluster-info ConfigMap, in BootstrapTokenGroup, expiring at Expires
// (never, for a standing token).
func (t BootstrapToken) Secret() *corev1.Secret {
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(t.ID),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(t.TokenSecret),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
		bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(BootstrapTokenGroup),
	}
	if !t.Expires.IsZero() {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(t.Expires.UTC().Format(time.RFC3339))
	}
	if t.Description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(t.Description)
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      bootstraputil.BootstrapTokenSecretName(t.ID),
			Namespace: metav1.NamespaceSystem,
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		Data: data,
	}
}

// WithID is t with another public half (its secret, expiry and
// description kept): a token whose ID is derived from what mints it.
func (t BootstrapToken) WithID(id string) (BootstrapToken, error) {
	return newBootstrapToken(id, t.TokenSecret, t.Expires, t.Description)
}
