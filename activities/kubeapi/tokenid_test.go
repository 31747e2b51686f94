package kubeapi

import (
	"context"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/kube"
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
	first, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{TTL: "10m", Description: "join w1"}, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{TTL: "10m", Description: "join w1"}, key)
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
	other, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{TTL: "10m"}, strings.Repeat("cd", 32))
	if err != nil || other.TokenID == first.TokenID {
		t.Errorf("another step's token: %s (%v)", other.TokenID, err)
	}

	// Someone else's Secret under that name is not replaced.
	sec := list.Items[0]
	sec.Labels = map[string]string{MintedByLabel: "another"}
	if _, err := cs.CoreV1().Secrets("kube-system").Update(ctx, &sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{TTL: "10m"}, key); err == nil {
		t.Error("a Secret this step did not mint was replaced")
	}
	got, _ := cs.CoreV1().Secrets("kube-system").Get(ctx, sec.Name, metav1.GetOptions{})
	if got.Labels[MintedByLabel] != "another" || string(got.Data["token-secret"]) != strings.Split(second.Token, ".")[1] {
		t.Errorf("the other Secret changed: %v", got.Labels)
	}
}

// A node joined on a cluster whose nodes keep their bootstrap credential
// (Typhoon's) gets a standing token of its own: no expiry, labelled for
// the Node, the one of that Node (a re-join replaces it, another Node's
// stays), revoked by node with kube.delete-bootstrap-token. A ttl with
// it, or a node name that is not one, is refused.
func TestAStandingTokenIsTheNodesOwnUntilRevoked(t *testing.T) {
	a, cs := fakeActs()
	ctx := context.Background()
	tokens := func() map[string]string {
		list, _ := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		out := map[string]string{}
		for _, s := range list.Items {
			if _, expires := s.Data["expiration"]; expires {
				out[s.Name] = "expires"
			} else {
				out[s.Name] = s.Labels[NodeTokenLabel]
			}
		}
		return out
	}
	first, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{ForNode: "tyw3.example.com", Description: "kedge node-join tyw3"}, strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	if first.Expires != "" || tokens()["bootstrap-token-"+first.TokenID] != "tyw3.example.com" {
		t.Fatalf("standing token %+v: Secrets %v", first, tokens())
	}
	other, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{ForNode: "tyw4.example.com"}, strings.Repeat("cd", 32))
	if err != nil {
		t.Fatal(err)
	}
	join, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{TTL: "15m"}, strings.Repeat("ef", 32))
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.createBootstrapToken(ctx, kube.CreateBootstrapTokenInput{ForNode: "tyw3.example.com"}, strings.Repeat("01", 32))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bootstrap-token-" + again.TokenID: "tyw3.example.com", "bootstrap-token-" + other.TokenID: "tyw4.example.com", "bootstrap-token-" + join.TokenID: "expires"}
	if got := tokens(); !maps.Equal(got, want) {
		t.Errorf("after a re-join of tyw3: %v, want %v", got, want)
	}
	if res, err := a.DeleteBootstrapToken(ctx, kube.DeleteBootstrapTokenInput{ForNode: "tyw3.example.com"}); err != nil || !res.Changed {
		t.Fatalf("revoke tyw3's: %+v %v", res, err)
	}
	delete(want, "bootstrap-token-"+again.TokenID)
	if got := tokens(); !maps.Equal(got, want) {
		t.Errorf("after tyw3's revoke: %v, want %v", got, want)
	}
	if res, err := a.DeleteBootstrapToken(ctx, kube.DeleteBootstrapTokenInput{ForNode: "tyw3.example.com"}); err != nil || res.Changed {
		t.Errorf("a second revoke: %+v %v", res, err)
	}
	for _, in := range []kube.CreateBootstrapTokenInput{{ForNode: "tyw3.example.com", TTL: "15m"}, {ForNode: "tyw3 example"}} {
		if _, err := a.createBootstrapToken(ctx, in, ""); err == nil {
			t.Errorf("%+v was not refused", in)
		}
	}
	for _, in := range []kube.DeleteBootstrapTokenInput{{}, {ForNode: "a", TokenID: "abcdef"}} {
		if _, err := a.DeleteBootstrapToken(ctx, in); err == nil {
			t.Errorf("delete %+v was not refused", in)
		}
	}
}
