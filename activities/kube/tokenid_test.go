package kube

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A worker killed after its Create reached the API server retries the
// activity with the same key: the retry mints the same token ID and
// replaces that Secret (whose secret half never reached anyone) instead
// of leaving a second token the revoke step knows nothing of. A Secret of
// that name that this step did not mint is left alone.
func TestCreateBootstrapTokenRetriedMintsOneToken(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	key := strings.Repeat("ab", 32)
	first, err := a.createBootstrapToken(ctx, CreateBootstrapTokenInput{TTL: "10m", Description: "join w1"}, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.createBootstrapToken(ctx, CreateBootstrapTokenInput{TTL: "10m", Description: "join w1"}, key)
	if err != nil {
		t.Fatal(err)
	}
	if first.TokenID != second.TokenID || first.TokenID != tokenIDFor(key) || first.Token == second.Token {
		t.Errorf("attempts of one step: %s then %s (same secret: %v)", first.TokenID, second.TokenID, first.Token == second.Token)
	}
	list, _ := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 || string(list.Items[0].Data["token-secret"]) != strings.Split(second.Token, ".")[1] {
		t.Fatalf("Secrets after two attempts: %d, want the second attempt's only", len(list.Items))
	}
	// Another step mints another token.
	other, err := a.createBootstrapToken(ctx, CreateBootstrapTokenInput{TTL: "10m"}, strings.Repeat("cd", 32))
	if err != nil || other.TokenID == first.TokenID {
		t.Errorf("another step's token: %s (%v)", other.TokenID, err)
	}

	// Someone else's Secret under that name is not replaced.
	sec := list.Items[0]
	sec.Labels = map[string]string{MintedByLabel: "another"}
	if _, err := cs.CoreV1().Secrets("kube-system").Update(ctx, &sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.createBootstrapToken(ctx, CreateBootstrapTokenInput{TTL: "10m"}, key); err == nil {
		t.Error("a Secret this step did not mint was replaced")
	}
	got, _ := cs.CoreV1().Secrets("kube-system").Get(ctx, sec.Name, metav1.GetOptions{})
	if got.Labels[MintedByLabel] != "another" || string(got.Data["token-secret"]) != strings.Split(second.Token, ".")[1] {
		t.Errorf("the other Secret changed: %v", got.Labels)
	}
}
