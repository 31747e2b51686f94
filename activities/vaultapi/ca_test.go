package vaultapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/actions/vault"
)

// fakePKI is the part of Vault vault.cluster-ca talks to: a KV v2 mount
// "secret" and a PKI mount "pki" whose root signs intermediates. It
// records the PKI calls and numbers the issuers it imports.
type fakePKI struct {
	mu      sync.Mutex
	kv      map[string]map[string]any
	calls   []string
	issuers int
}

func (f *fakePKI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	p := strings.TrimPrefix(r.URL.Path, "/v1/")
	answer := func(data map[string]any) { _ = json.NewEncoder(w).Encode(map[string]any{"data": data}) }
	switch {
	case strings.HasPrefix(p, "secret/data/"):
		key := strings.TrimPrefix(p, "secret/data/")
		if r.Method == http.MethodGet {
			data, ok := f.kv[key]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"errors":[]}`))
				return
			}
			answer(map[string]any{"data": data, "metadata": map[string]any{"version": 1}})
			return
		}
		var body struct {
			Data map[string]any `json:"data"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		f.kv[key] = body.Data
		answer(map[string]any{"version": 1})
	case p == "pki/intermediate/generate/exported":
		f.calls = append(f.calls, p)
		answer(map[string]any{"csr": "CSR", "private_key": "-----BEGIN EC PRIVATE KEY-----\nKEY\n-----END EC PRIVATE KEY-----"})
	case p == "pki/intermediate/generate/internal":
		f.calls = append(f.calls, p)
		answer(map[string]any{"csr": "CSR", "key_id": "k1"})
	case p == "pki/root/sign-intermediate":
		f.calls = append(f.calls, p)
		answer(map[string]any{"certificate": "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----"})
	case p == "pki/intermediate/set-signed":
		f.calls = append(f.calls, p)
		f.issuers++
		answer(map[string]any{"imported_issuers": []any{"issuer-" + string(rune('0'+f.issuers))}})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errors":["no handler for ` + p + `"]}`))
	}
}

// The cluster CA and etcd's CA are two issuers, each made once: the
// cluster CA's key is exported and kept (the controller-manager signs with
// it), etcd's is made inside Vault and never leaves it.
func TestClusterCAKeepsEachCAApartAndMakesItOnce(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "test-token")
	f := &fakePKI{kv: map[string]map[string]any{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	a := &Activities{}
	ctx := context.Background()
	cfg := target.Vault{Address: srv.URL}

	cluster, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: "kedge/clusters/m/ca", CommonName: "m kubernetes CA"})
	if err != nil {
		t.Fatal(err)
	}
	if !cluster.Created || cluster.PrivateKey == "" || cluster.Issuer != "issuer-1" {
		t.Errorf("cluster CA %+v", cluster)
	}
	etcd, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: "kedge/clusters/m/etcd-ca", CommonName: "m etcd CA", KeyInVault: true})
	if err != nil {
		t.Fatal(err)
	}
	if !etcd.Created || etcd.PrivateKey != "" || etcd.Issuer != "issuer-2" || etcd.Certificate == "" {
		t.Errorf("etcd CA %+v", etcd)
	}
	if _, ok := f.kv["kedge/clusters/m/etcd-ca"]["privateKey"]; ok {
		t.Error("the etcd CA's KV record holds a private key")
	}
	want := "pki/intermediate/generate/exported pki/root/sign-intermediate pki/intermediate/set-signed " +
		"pki/intermediate/generate/internal pki/root/sign-intermediate pki/intermediate/set-signed"
	if got := strings.Join(f.calls, " "); got != want {
		t.Errorf("PKI calls\n got %s\nwant %s", got, want)
	}

	// Later calls return the same CAs and make nothing.
	f.calls = nil
	again, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: "kedge/clusters/m/etcd-ca", CommonName: "m etcd CA", KeyInVault: true})
	if err != nil || again.Created || again.Issuer != etcd.Issuer || again.Certificate != etcd.Certificate || again.PrivateKey != "" {
		t.Errorf("etcd CA again: %+v %v", again, err)
	}
	clusterAgain, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: "kedge/clusters/m/ca", CommonName: "m kubernetes CA"})
	if err != nil || clusterAgain.Created || clusterAgain.Issuer != cluster.Issuer || clusterAgain.PrivateKey != cluster.PrivateKey {
		t.Errorf("cluster CA again: %+v %v", clusterAgain, err)
	}
	if len(f.calls) != 0 {
		t.Errorf("a second call made a CA: %v", f.calls)
	}

	// A step that asks for the other kind of CA names the wrong path.
	for _, in := range []vault.ClusterCAInput{
		{Vault: cfg, Path: "kedge/clusters/m/etcd-ca", CommonName: "m etcd CA"},
		{Vault: cfg, Path: "kedge/clusters/m/ca", CommonName: "m kubernetes CA", KeyInVault: true},
	} {
		_, err := a.ClusterCA(ctx, in)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || !errtype.Is(err, errtype.InvalidInput) || !ae.NonRetryable() {
			t.Errorf("%s keyInVault=%t: %v, want a non-retryable %s", in.Path, in.KeyInVault, err, errtype.InvalidInput)
		}
	}
}
