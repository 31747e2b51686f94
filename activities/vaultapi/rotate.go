package vaultapi

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/errtype"
)

// StageCA makes the CA that is to replace the one kept at in.Path
// (vault.stage-ca), beside it: a new issuer in the same PKI mount, kept in
// KV at PATH-next. Nothing about the CA in use changes: its record, its
// issuer and every certificate it signed stay as they are. A run that
// comes back (a worker lost, a rotation resumed) gets the CA made the
// first time, never a second one.
func (a *Activities) StageCA(ctx context.Context, in vault.StageCAInput) (vault.StageCAResult, error) {
	if strings.TrimSpace(in.Path) == "" || strings.TrimSpace(in.CommonName) == "" {
		return vault.StageCAResult{}, invalid("path and commonName are required")
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return vault.StageCAResult{}, err
	}
	kv := cl.KVv2(cmp.Or(in.Vault.KV, "secret"))
	have, err := kvGet(ctx, kv, in.Path)
	if err != nil {
		return vault.StageCAResult{}, classify("read the CA at "+in.Path, err)
	}
	if have == nil {
		return vault.StageCAResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("Vault keeps no CA at %s: there is nothing to rotate (adopt the cluster first, or check the path)", in.Path), errtype.NotAdopted, nil)
	}
	asked := vault.ClusterCAInput{Vault: in.Vault, Path: in.Path, CommonName: in.CommonName, TTL: in.TTL, KeyInVault: in.KeyInVault}
	old, err := storedCA(asked, have)
	if err != nil {
		return vault.StageCAResult{}, err
	}
	next := vault.NextPath(in.Path)
	var staged vault.ClusterCAResult
	if had, err := kvGet(ctx, kv, next); err != nil {
		return vault.StageCAResult{}, classify("read the staged CA at "+next, err)
	} else if had != nil {
		asked.Path = next
		if staged, err = storedCA(asked, had); err != nil {
			return vault.StageCAResult{}, err
		}
	} else {
		res, keep, err := newCA(ctx, cl, asked)
		if err != nil {
			return vault.StageCAResult{}, err
		}
		keep["replaces"] = old.Issuer
		if _, err := kv.Put(ctx, next, keep); err != nil {
			return vault.StageCAResult{}, classify("keep the staged CA at "+next, err)
		}
		staged = res
	}
	return vault.StageCAResult{
		Certificate:    staged.Certificate,
		PrivateKey:     staged.PrivateKey,
		Issuer:         staged.Issuer,
		OldCertificate: old.Certificate,
		OldIssuer:      old.Issuer,
		Bundle:         strings.TrimSpace(old.Certificate) + "\n" + strings.TrimSpace(staged.Certificate) + "\n",
		Created:        staged.Created,
	}, nil
}
