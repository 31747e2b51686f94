package sshhost

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// token is a projected token as the API server writes it, signed by
// nobody: only its header matters here.
func token(kid string) string {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"` + kid + `"}`))
	return h + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"system:serviceaccount:default:default"}`)) + ".c2lnbmF0dXJl"
}

func publicKeyPEM(t *testing.T) (string, string) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), base64.RawURLEncoding.EncodeToString(sum[:])
}

// A host whose kubelet keeps two pods' tokens: the one the old key
// signed is named until it is renewed, and only the headers are read.
func TestWaitPodTokensNamesThePodsOnTheOldKey(t *testing.T) {
	w := newWorld(t)
	tokenPoll = 50 * time.Millisecond
	t.Cleanup(func() { tokenPoll = 10 * time.Second })
	w.acts.KubeletDir = filepath.Join(w.srv.Dir, "kubelet dir")
	oldPub, oldKID := publicKeyPEM(t)
	_, newKID := publicKeyPEM(t)
	write := func(uid, volume, tok string) string {
		dir := filepath.Join(w.acts.KubeletDir, "pods", uid, "volumes", "kubernetes.io~projected", volume)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "token")
		if err := os.WriteFile(p, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("uid-new", "kube-api-access-a", token(newKID))
	stale := write("uid-old", "kube-api-access-b", token(oldKID))
	// Not a token: a projected ConfigMap beside it.
	if err := os.WriteFile(filepath.Join(filepath.Dir(stale), "ca.crt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	res, err := w.acts.WaitPodTokens(t.Context(), host.WaitPodTokensInput{Target: w.tg, OldPublicKey: oldPub})
	app := appErr(t, err, errtype.OldKeyInUse, true)
	if res.Tokens != 2 || !slices.Equal(res.OldKey, []string{"uid-old"}) || res.KeyID != oldKID || !strings.Contains(app.Error(), "uid-old") {
		t.Fatalf("%+v %v", res, err)
	}

	// The kubelet renews the token while the action waits.
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = os.WriteFile(stale, []byte(token(newKID)), 0o600)
	}()
	res, err = w.acts.WaitPodTokens(t.Context(), host.WaitPodTokensInput{Target: w.tg, OldPublicKey: oldPub, Wait: "1m"})
	if err != nil || res.Tokens != 2 || len(res.OldKey) != 0 {
		t.Fatalf("after the renewal: %+v %v", res, err)
	}

	// A host without pods has nothing to wait for.
	w.acts.KubeletDir = filepath.Join(w.srv.Dir, "none")
	if res, err := w.acts.WaitPodTokens(t.Context(), host.WaitPodTokensInput{Target: w.tg, OldPublicKey: oldPub}); err != nil || res.Tokens != 0 {
		t.Errorf("no pods: %+v %v", res, err)
	}
	for _, in := range []host.WaitPodTokensInput{{Target: w.tg}, {Target: w.tg, OldPublicKey: oldPub, Wait: "-1s"}, {Target: w.tg, OldPublicKey: oldPub, Wait: "5h"}} {
		_, err := w.acts.WaitPodTokens(t.Context(), in)
		appErr(t, err, errtype.InvalidInput, true)
	}
}
