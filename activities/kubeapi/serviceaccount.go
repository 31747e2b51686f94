package kubeapi

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strings"

	"go.temporal.io/sdk/temporal"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/internal/pubkey"
)

// CheckServiceAccountKey asks the API server for a short-lived token
// (TokenRequest, 10 minutes, never stored) and checks its signature with
// the public key: proof that the API server signs with the key's private
// half, not only that it would accept it.
func (a *Activities) CheckServiceAccountKey(ctx context.Context, in kube.CheckServiceAccountKeyInput) (kube.CheckServiceAccountKeyResult, error) {
	pub, err := pubkey.Parse(in.PublicKey)
	if err != nil {
		return kube.CheckServiceAccountKeyResult{}, temporal.NewNonRetryableApplicationError("publicKey: "+err.Error(), errtype.InvalidInput, nil)
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.CheckServiceAccountKeyResult{}, err
	}
	ns, sa := in.Namespace, in.Account
	if ns == "" {
		ns = "default"
	}
	if sa == "" {
		sa = "default"
	}
	ttl := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		// A new cluster's controller-manager makes it shortly.
		return kube.CheckServiceAccountKeyResult{}, temporal.NewApplicationError(fmt.Sprintf("service account %s/%s does not exist (yet)", ns, sa), errtype.KubernetesAPI)
	}
	if err != nil {
		return kube.CheckServiceAccountKeyResult{}, clusterError("request a token for "+ns+"/"+sa, err)
	}
	alg, kid, err := verifyJWT(tr.Status.Token, pub)
	if err != nil {
		return kube.CheckServiceAccountKeyResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("a token the API server issued for %s/%s does not verify with the key given: %v", ns, sa, err), errtype.ServiceAccountKeyMismatch, nil)
	}
	return kube.CheckServiceAccountKeyResult{Algorithm: alg, KeyID: kid}, nil
}

// verifyJWT checks a compact JWS's signature (RS256/384/512,
// ES256/384/512) with pub.
func verifyJWT(token string, pub crypto.PublicKey) (alg, kid string, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", errors.New("not a compact JWS")
	}
	head, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return "", "", fmt.Errorf("header: %w", err)
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(head, &h); err != nil {
		return "", "", fmt.Errorf("header: %w", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return h.Alg, h.Kid, fmt.Errorf("signature: %w", err)
	}
	if len(h.Alg) != 5 {
		return h.Alg, h.Kid, fmt.Errorf("algorithm %q", h.Alg)
	}
	var hf func() hash.Hash
	var ch crypto.Hash
	switch h.Alg[2:] {
	case "256":
		hf, ch = sha256.New, crypto.SHA256
	case "384":
		hf, ch = sha512.New384, crypto.SHA384
	case "512":
		hf, ch = sha512.New, crypto.SHA512
	default:
		return h.Alg, h.Kid, fmt.Errorf("algorithm %q", h.Alg)
	}
	d := hf()
	d.Write([]byte(parts[0] + "." + parts[1]))
	sum := d.Sum(nil)
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if !strings.HasPrefix(h.Alg, "RS") {
			return h.Alg, h.Kid, fmt.Errorf("token signed %s, key is RSA", h.Alg)
		}
		return h.Alg, h.Kid, rsa.VerifyPKCS1v15(k, ch, sum, sig)
	case *ecdsa.PublicKey:
		if !strings.HasPrefix(h.Alg, "ES") || len(sig)%2 != 0 {
			return h.Alg, h.Kid, fmt.Errorf("token signed %s, key is ECDSA", h.Alg)
		}
		r, s := new(big.Int).SetBytes(sig[:len(sig)/2]), new(big.Int).SetBytes(sig[len(sig)/2:])
		if !ecdsa.Verify(k, sum, r, s) {
			return h.Alg, h.Kid, errors.New("ECDSA signature does not verify")
		}
		return h.Alg, h.Kid, nil
	}
	return h.Alg, h.Kid, fmt.Errorf("unsupported key %T", pub)
}
