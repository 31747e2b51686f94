package vaultapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/target"
)

// A rotation's new CA is made once, beside the one in use, which stays as
// it was; a cluster with no CA in Vault has nothing to rotate.
func TestStageCAMakesTheNextCAOnceBesideTheOld(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "test-token")
	f := &fakePKI{kv: map[string]map[string]any{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	a := &Activities{}
	ctx := context.Background()
	cfg := target.Vault{Address: srv.URL}

	in := vault.StageCAInput{Vault: cfg, Path: "kedge/clusters/m/ca", CommonName: "m kubernetes CA 2"}
	var ae *temporal.ApplicationError
	if _, err := a.StageCA(ctx, in); !errors.As(err, &ae) || !errtype.Is(err, errtype.NotAdopted) || !ae.NonRetryable() {
		t.Fatalf("no CA to rotate: %v", err)
	}
	old, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: in.Path, CommonName: "m kubernetes CA"})
	if err != nil {
		t.Fatal(err)
	}
	before := f.kv[in.Path]
	f.calls = nil
	staged, err := a.StageCA(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !staged.Created || staged.Issuer == old.Issuer || staged.OldIssuer != old.Issuer || staged.PrivateKey == "" || staged.OldCertificate != old.Certificate {
		t.Errorf("staged %+v, old %+v", staged, old)
	}
	if want := strings.TrimSpace(old.Certificate) + "\n" + strings.TrimSpace(staged.Certificate) + "\n"; staged.Bundle != want {
		t.Errorf("bundle %q, want the CA in use first: %q", staged.Bundle, want)
	}
	if rec := f.kv[vault.NextPath(in.Path)]; rec["issuer"] != staged.Issuer || rec["replaces"] != old.Issuer || rec["privateKey"] != staged.PrivateKey {
		t.Errorf("the staged CA's record: %v", rec)
	}
	if got := f.kv[in.Path]; got["issuer"] != before["issuer"] || got["privateKey"] != before["privateKey"] {
		t.Errorf("the CA in use changed: %v, was %v", got, before)
	}
	if got := strings.Join(f.calls, " "); got != "pki/intermediate/generate/exported pki/root/sign-intermediate pki/intermediate/set-signed" {
		t.Errorf("PKI calls: %s", got)
	}

	// Resumed: the same new CA, nothing made.
	f.calls = nil
	again, err := a.StageCA(ctx, in)
	if err != nil || again.Created || again.Issuer != staged.Issuer || again.PrivateKey != staged.PrivateKey || len(f.calls) != 0 {
		t.Errorf("again: %+v %v, calls %v", again, err, f.calls)
	}

	// etcd's CA keeps its key in Vault, and so does its successor.
	if _, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: "kedge/clusters/m/etcd-ca", CommonName: "m etcd CA", KeyInVault: true}); err != nil {
		t.Fatal(err)
	}
	etcd, err := a.StageCA(ctx, vault.StageCAInput{Vault: cfg, Path: "kedge/clusters/m/etcd-ca", CommonName: "m etcd CA 2", KeyInVault: true})
	if err != nil || etcd.PrivateKey != "" || f.kv["kedge/clusters/m/etcd-ca-next"]["privateKey"] != nil {
		t.Errorf("etcd: %+v %v", etcd, err)
	}
	if _, err := a.StageCA(ctx, vault.StageCAInput{Vault: cfg, Path: "kedge/clusters/m/etcd-ca", CommonName: "m etcd CA 2"}); !errtype.Is(err, errtype.InvalidInput) {
		t.Errorf("etcd's CA asked for with an exported key: %v", err)
	}
}
