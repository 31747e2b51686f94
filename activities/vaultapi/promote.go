package vaultapi

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/vault"
)

// record is a KV record of a CA (vault.cluster-ca, vault.stage-ca) or a
// key pair (vault.key-pair), as promote-ca sees it.
type record struct {
	path string
	data map[string]string
	// id tells one CA or key pair from another: a CA's issuer, a key
	// pair's public key's digest.
	id         string
	keyPair    bool
	keyInVault bool
}

// readRecord reads and checks the record at path; nil when there is none
// (or its latest version was deleted).
func readRecord(ctx context.Context, kv *vaultapi.KVv2, path string) (*record, error) {
	data, err := kvGet(ctx, kv, path)
	if err != nil {
		return nil, classify("read "+path, err)
	}
	if len(data) == 0 {
		return nil, nil
	}
	r := &record{path: path, data: data}
	if data["certificate"] == "" && data["publicKey"] != "" {
		if data["privateKey"] == "" {
			return nil, invalid(fmt.Sprintf("%s holds an incomplete key pair (want privateKey, publicKey)", path))
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(data["publicKey"])))
		r.keyPair, r.id = true, "sha256:"+hex.EncodeToString(sum[:])
		return r, nil
	}
	r.keyInVault = data["keyInVault"] == "true"
	if _, err := storedCA(vault.ClusterCAInput{Path: path, KeyInVault: r.keyInVault}, data); err != nil {
		return nil, err
	}
	r.id = data["issuer"]
	return r, nil
}

// kind names what a record keeps, for messages.
func (r *record) kind() string {
	switch {
	case r.keyPair:
		return "a key pair"
	case r.keyInVault:
		return "a CA whose key stays in Vault"
	}
	return "a CA whose key was exported"
}

// PromoteCA makes the CA (or key pair) staged at PATH-next the one in use
// at PATH (vault.promote-ca), the last stage of a rotation in Vault: the
// record in use moves to PATH-previous (with promotedAt), the staged one
// to PATH (with promotedAt and the id of the one it replaces), PATH-next
// goes. The old issuer stays in the PKI mount; when it was the mount's
// default issuer, the new one becomes the default. A run that comes back
// after any of these writes finishes the move; one after a finished move
// changes nothing. With nothing at PATH-next and PATH not a promoted
// successor, it fails (NotStaged).
func (a *Activities) PromoteCA(ctx context.Context, in vault.PromoteCAInput) (vault.PromoteCAResult, error) {
	if strings.TrimSpace(in.Path) == "" {
		return vault.PromoteCAResult{}, invalid("path is required")
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return vault.PromoteCAResult{}, err
	}
	kv := cl.KVv2(cmp.Or(in.Vault.KV, "secret"))
	nextPath, prevPath := vault.NextPath(in.Path), vault.PreviousPath(in.Path)
	var cur, next, prev *record
	for _, r := range []struct {
		to   **record
		path string
	}{{&cur, in.Path}, {&next, nextPath}, {&prev, prevPath}} {
		if *r.to, err = readRecord(ctx, kv, r.path); err != nil {
			return vault.PromoteCAResult{}, err
		}
	}
	if cur == nil {
		return vault.PromoteCAResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("Vault keeps nothing at %s: there is nothing to promote over (check the path)", in.Path), errtype.NotAdopted, nil)
	}
	if next == nil {
		if prev == nil || cur.data["promotedAt"] == "" || cur.data["replaces"] != prev.id {
			return vault.PromoteCAResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("Vault keeps nothing at %s, and %s is not a promoted successor: stage one first (vault.stage-ca, or vault.key-pair at %s)", nextPath, in.Path, nextPath),
				errtype.NotStaged, nil)
		}
		// Promoted by a run before: at most the default issuer is left.
		res := vault.PromoteCAResult{Issuer: cur.data["issuer"], PreviousIssuer: prev.data["issuer"]}
		if res.DefaultIssuer, err = moveDefault(ctx, cl, in.Vault.PKI, prev, cur); err != nil {
			return res, err
		}
		res.Changed = res.DefaultIssuer
		return res, nil
	}
	if next.keyPair != cur.keyPair || next.keyInVault != cur.keyInVault {
		return vault.PromoteCAResult{}, invalid(fmt.Sprintf("%s holds %s, %s %s: one cannot replace the other", in.Path, cur.kind(), nextPath, next.kind()))
	}
	old, err := move(ctx, kv, cur, next, prev)
	if err != nil {
		return vault.PromoteCAResult{}, err
	}
	res := vault.PromoteCAResult{Issuer: next.data["issuer"], PreviousIssuer: old.data["issuer"], Changed: true}
	if res.DefaultIssuer, err = moveDefault(ctx, cl, in.Vault.PKI, old, next); err != nil {
		return res, err
	}
	if err := kv.DeleteMetadata(ctx, nextPath); err != nil {
		return res, classify("delete "+nextPath+" (now at "+in.Path+")", err)
	}
	return res, nil
}

// move writes the record in use to PATH-previous and the staged one to
// PATH, and returns the record replaced. When PATH already holds the
// staged record (a run before wrote it), the replaced one is the one at
// PATH-previous and nothing is written.
func move(ctx context.Context, kv *vaultapi.KVv2, cur, next, prev *record) (*record, error) {
	if cur.id == next.id {
		if prev == nil || cur.data["replaces"] != prev.id {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"%s and %s hold the same %s, and %s does not hold the one it replaced: promote it by hand", cur.path, next.path, strings.TrimPrefix(cur.kind(), "a "), vault.PreviousPath(cur.path)),
				errtype.VaultConflict, nil)
		}
		return prev, nil
	}
	if r := next.data["replaces"]; r != "" && r != cur.id {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s was staged to replace %s, but %s holds %s: stage again against the one in use", next.path, r, cur.path, cur.id), errtype.VaultConflict, nil)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	prevPath := vault.PreviousPath(cur.path)
	keep := func(r *record, extra map[string]string) map[string]any {
		out := map[string]any{}
		for k, v := range r.data {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	if _, err := kv.Put(ctx, prevPath, keep(cur, map[string]string{"promotedAt": now})); err != nil {
		return nil, classify("keep the record in use at "+prevPath, err)
	}
	if _, err := kv.Put(ctx, cur.path, keep(next, map[string]string{"promotedAt": now, "replaces": cur.id})); err != nil {
		return nil, classify("promote "+next.path+" to "+cur.path, err)
	}
	return &record{path: prevPath, data: maps.Clone(cur.data), id: cur.id, keyPair: cur.keyPair, keyInVault: cur.keyInVault}, nil
}

// moveDefault makes the new issuer the PKI mount's default when the old
// one is: certificates issued without naming an issuer then come from
// the new CA. It says whether it did. Key pairs have no issuer; a mount
// without the issuer API (Vault before 1.11) has no default to move.
func moveDefault(ctx context.Context, cl *vaultapi.Client, mount string, old, next *record) (bool, error) {
	if old.keyPair || old.id == "" || next.id == "" {
		return false, nil
	}
	p := cmp.Or(mount, "pki") + "/config/issuers"
	sec, err := cl.Logical().ReadWithContext(ctx, p)
	var re *vaultapi.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound || err == nil && sec == nil {
		return false, nil
	}
	if err != nil {
		return false, classify("read the default issuer at "+p, err)
	}
	if def, _ := sec.Data["default"].(string); def != old.id {
		return false, nil
	}
	if _, err := cl.Logical().WriteWithContext(ctx, p, map[string]any{"default": next.id}); err != nil {
		return false, classify("make "+next.id+" the default issuer at "+p, err)
	}
	return true, nil
}
