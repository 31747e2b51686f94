package vaultapi

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/target"
)

// promoteFake is fakePKI with what vault.promote-ca also uses: deleting
// a KV secret's every version, and the PKI mount's default issuer.
type promoteFake struct {
	*fakePKI
	defaultIssuer string
	deleted       []string
}

func (f *promoteFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/v1/")
	switch {
	case strings.HasPrefix(p, "secret/metadata/") && r.Method == http.MethodDelete:
		f.mu.Lock()
		key := strings.TrimPrefix(p, "secret/metadata/")
		delete(f.kv, key)
		f.deleted = append(f.deleted, key)
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case p == "pki/config/issuers" && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"default": f.defaultIssuer}})
	case p == "pki/config/issuers":
		var body struct {
			Default string `json:"default"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.defaultIssuer = body.Default
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"default": f.defaultIssuer}})
	default:
		f.fakePKI.ServeHTTP(w, r)
	}
}

func newPromoteFake(t *testing.T) (*promoteFake, *Activities, target.Vault) {
	t.Helper()
	t.Setenv("VAULT_TOKEN", "test-token")
	f := &promoteFake{fakePKI: &fakePKI{kv: map[string]map[string]any{}}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, &Activities{}, target.Vault{Address: srv.URL}
}

func appErr(err error) *temporal.ApplicationError {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// A staged CA becomes the one in use: the old record is kept at
// PATH-previous, PATH-next goes, the default issuer follows when it was
// the old one, and vault.cluster-ca then returns the new CA. Run again,
// nothing changes; with nothing staged and nothing promoted, it fails.
func TestPromoteCAMovesTheStagedCAInOnce(t *testing.T) {
	f, a, cfg := newPromoteFake(t)
	ctx := context.Background()
	path := "kedge/clusters/m/ca"
	in := vault.PromoteCAInput{Vault: cfg, Path: path}
	if _, err := a.PromoteCA(ctx, in); !errtype.Is(err, errtype.NotAdopted) {
		t.Errorf("nothing at the path: %v", err)
	}
	old, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: path, CommonName: "m CA"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.PromoteCA(ctx, in); !errtype.Is(err, errtype.NotStaged) || !appErr(err).NonRetryable() {
		t.Errorf("nothing staged: %v", err)
	}
	staged, err := a.StageCA(ctx, vault.StageCAInput{Vault: cfg, Path: path, CommonName: "m CA 2"})
	if err != nil {
		t.Fatal(err)
	}
	f.defaultIssuer = old.Issuer
	res, err := a.PromoteCA(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if want := (vault.PromoteCAResult{Issuer: staged.Issuer, PreviousIssuer: old.Issuer, Changed: true, DefaultIssuer: true}); res != want {
		t.Errorf("promoted: %+v, want %+v", res, want)
	}
	cur, prev := f.kv[path], f.kv[vault.PreviousPath(path)]
	if cur["issuer"] != staged.Issuer || cur["privateKey"] != staged.PrivateKey || cur["replaces"] != old.Issuer || cur["promotedAt"] == nil {
		t.Errorf("in use: %v", cur)
	}
	if prev["issuer"] != old.Issuer || prev["privateKey"] != old.PrivateKey || prev["promotedAt"] != cur["promotedAt"] {
		t.Errorf("previous: %v", prev)
	}
	if _, ok := f.kv[vault.NextPath(path)]; ok || f.defaultIssuer != staged.Issuer {
		t.Errorf("next still kept (%t) or the default issuer not moved: %s", ok, f.defaultIssuer)
	}
	if now, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: path, CommonName: "m CA"}); err != nil || now.Issuer != staged.Issuer || now.Created {
		t.Errorf("vault.cluster-ca after the promotion: %+v %v", now, err)
	}

	before := maps.Clone(f.kv)
	f.deleted = nil
	again, err := a.PromoteCA(ctx, in)
	if err != nil || again != (vault.PromoteCAResult{Issuer: staged.Issuer, PreviousIssuer: old.Issuer}) {
		t.Errorf("again: %+v %v", again, err)
	}
	if len(f.kv) != len(before) || f.kv[path]["promotedAt"] != before[path]["promotedAt"] || len(f.deleted) != 0 {
		t.Errorf("a second run changed KV: %v", f.kv)
	}

	// A default issuer other than the old one stays.
	f.defaultIssuer = "root"
	if _, err := a.StageCA(ctx, vault.StageCAInput{Vault: cfg, Path: path, CommonName: "m CA 3"}); err != nil {
		t.Fatal(err)
	}
	if res, err := a.PromoteCA(ctx, in); err != nil || res.DefaultIssuer || f.defaultIssuer != "root" || res.PreviousIssuer != staged.Issuer {
		t.Errorf("a third CA: %+v %v, default %s", res, err, f.defaultIssuer)
	}
}

// A run that stopped after writing PATH (PATH-next not yet deleted)
// finishes the move and keeps the CA it replaced at PATH-previous, never
// the new one.
func TestPromoteCAFinishesAnInterruptedMove(t *testing.T) {
	f, a, cfg := newPromoteFake(t)
	ctx := context.Background()
	path := "kedge/clusters/m/etcd-ca"
	old, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: path, CommonName: "m etcd CA", KeyInVault: true})
	if err != nil {
		t.Fatal(err)
	}
	staged, err := a.StageCA(ctx, vault.StageCAInput{Vault: cfg, Path: path, CommonName: "m etcd CA 2", KeyInVault: true})
	if err != nil {
		t.Fatal(err)
	}
	next := f.kv[vault.NextPath(path)]
	f.kv[vault.PreviousPath(path)] = maps.Clone(f.kv[path])
	f.kv[vault.PreviousPath(path)]["promotedAt"] = "2026-11-26T00:00:00Z"
	f.kv[path] = maps.Clone(next)
	f.kv[path]["promotedAt"] = "2026-11-26T00:00:00Z"
	res, err := a.PromoteCA(ctx, vault.PromoteCAInput{Vault: cfg, Path: path})
	if err != nil || res.Issuer != staged.Issuer || res.PreviousIssuer != old.Issuer || !res.Changed {
		t.Fatalf("resumed: %+v %v", res, err)
	}
	if f.kv[vault.PreviousPath(path)]["issuer"] != old.Issuer || f.kv[path]["issuer"] != staged.Issuer || f.kv[path]["keyInVault"] != "true" {
		t.Errorf("after the resumed move: in use %v, previous %v", f.kv[path], f.kv[vault.PreviousPath(path)])
	}
	if _, ok := f.kv[vault.NextPath(path)]; ok {
		t.Error("next still kept")
	}
	if _, ok := f.kv[path]["privateKey"]; ok {
		t.Error("a CA whose key stays in Vault got a key")
	}
}

// The service-account key pair moves the same way (vault.key-pair makes
// its successor at PATH-next); records of different kinds never replace
// each other, nor one staged against another CA.
func TestPromoteCAMovesKeyPairsAndRefusesMismatches(t *testing.T) {
	f, a, cfg := newPromoteFake(t)
	ctx := context.Background()
	path := "kedge/clusters/m/service-account"
	old, err := a.KeyPair(ctx, vault.KeyPairInput{Vault: cfg, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	next, err := a.KeyPair(ctx, vault.KeyPairInput{Vault: cfg, Path: vault.NextPath(path)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.PromoteCA(ctx, vault.PromoteCAInput{Vault: cfg, Path: path})
	if err != nil || res != (vault.PromoteCAResult{Changed: true}) {
		t.Fatalf("key pair: %+v %v", res, err)
	}
	if now, err := a.KeyPair(ctx, vault.KeyPairInput{Vault: cfg, Path: path}); err != nil || now.PublicKey != next.PublicKey || now.PrivateKey != next.PrivateKey {
		t.Errorf("vault.key-pair after the promotion: %v", err)
	}
	if f.kv[vault.PreviousPath(path)]["publicKey"] != old.PublicKey {
		t.Errorf("previous key pair: %v", f.kv[vault.PreviousPath(path)])
	}
	if res, err := a.PromoteCA(ctx, vault.PromoteCAInput{Vault: cfg, Path: path}); err != nil || res.Changed {
		t.Errorf("key pair again: %+v %v", res, err)
	}

	ca := "kedge/clusters/m/ca"
	if _, err := a.ClusterCA(ctx, vault.ClusterCAInput{Vault: cfg, Path: ca, CommonName: "m CA"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.KeyPair(ctx, vault.KeyPairInput{Vault: cfg, Path: vault.NextPath(ca)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PromoteCA(ctx, vault.PromoteCAInput{Vault: cfg, Path: ca}); !errtype.Is(err, errtype.InvalidInput) ||
		!strings.Contains(err.Error(), "one cannot replace the other") {
		t.Errorf("a key pair staged for a CA: %v", err)
	}
	if _, err := a.StageCA(ctx, vault.StageCAInput{Vault: cfg, Path: "kedge/clusters/m/etcd-ca", CommonName: "x"}); err == nil {
		t.Fatal("staged with nothing in use")
	}
	f.kv[vault.NextPath(ca)] = map[string]any{"certificate": "C", "privateKey": "K", "issuer": "issuer-9", "replaces": "issuer-0"}
	if _, err := a.PromoteCA(ctx, vault.PromoteCAInput{Vault: cfg, Path: ca}); !errtype.Is(err, errtype.VaultConflict) || !appErr(err).NonRetryable() {
		t.Errorf("staged against another CA: %v", err)
	}
	f.kv[vault.NextPath(ca)] = map[string]any{"certificate": "C", "issuer": "issuer-9", "keyInVault": "true"}
	if _, err := a.PromoteCA(ctx, vault.PromoteCAInput{Vault: cfg, Path: ca}); !errtype.Is(err, errtype.InvalidInput) {
		t.Errorf("a CA kept in Vault staged for an exported one: %v", err)
	}
}

// A rotation on a cluster Kedge has not adopted reads the service-account
// key pair and must not make one: adopt would then refuse, a key already
// recorded. With mustExist nothing is written and the error says adopt.
func TestKeyPairMustExistMakesNothing(t *testing.T) {
	f, a, cfg := newPromoteFake(t)
	ctx := context.Background()
	path := "kedge/clusters/m/service-account"
	_, err := a.KeyPair(ctx, vault.KeyPairInput{Vault: cfg, Path: path, MustExist: true})
	if !errtype.Is(err, errtype.NotAdopted) || !strings.Contains(err.Error(), "adopt the cluster first") {
		t.Fatalf("a missing key pair with mustExist: %v", err)
	}
	if _, ok := f.kv[path]; ok {
		t.Fatal("mustExist made a key pair")
	}
	made, err := a.KeyPair(ctx, vault.KeyPairInput{Vault: cfg, Path: path})
	if err != nil || !made.Created {
		t.Fatalf("without mustExist: %+v %v", made, err)
	}
	if got, err := a.KeyPair(ctx, vault.KeyPairInput{Vault: cfg, Path: path, MustExist: true}); err != nil || got.PublicKey != made.PublicKey || got.Created {
		t.Errorf("an existing key pair with mustExist: %+v %v", got, err)
	}
}
