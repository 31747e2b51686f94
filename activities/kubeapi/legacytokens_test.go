package kubeapi

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/internal/satoken"
)

// Of three token Secrets, the one the old key signed is listed with its
// service account; one from the new key and an Opaque Secret holding an
// old-key token are not.
func TestLegacyTokensListsTheOldKeys(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	old := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	oldKID, _ := satoken.KeyID(old)
	tok := func(kid string) []byte {
		return []byte(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"`+kid+`"}`)) + ".e30.c2ln")
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "ci-token", Namespace: "ci", Annotations: map[string]string{corev1.ServiceAccountNameKey: "deployer"}},
			Type: corev1.SecretTypeServiceAccountToken, Data: map[string][]byte{"token": tok(oldKID)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "ci"}, Type: corev1.SecretTypeServiceAccountToken, Data: map[string][]byte{"token": tok("other")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "opaque", Namespace: "ci"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"token": tok(oldKID)}},
	} {
		if _, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := a.LegacyTokens(ctx, kube.LegacyTokensInput{PublicKey: old})
	if err != nil || !slices.Equal(res.SignedBy, []string{"ci/ci-token (deployer)"}) || res.Total != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := a.LegacyTokens(ctx, kube.LegacyTokensInput{PublicKey: "not a key"}); err == nil {
		t.Error("a public key that is none accepted")
	}
}
