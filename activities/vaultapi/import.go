package vaultapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/internal/pubkey"
)

// ImportCA takes an existing CA and its key into the PKI mount as an
// issuer and records it at Path the way vault.cluster-ca does, so every
// runbook that asks for the cluster's CA gets this one. A Path that already
// records the same CA is left as it is; one that records another CA is an
// ErrTypeConflict: a cluster's CA is never replaced.
func (a *Activities) ImportCA(ctx context.Context, in vault.ImportCAInput) (vault.ImportCAResult, error) {
	cert, err := checkCA(in.Certificate, in.PrivateKey)
	if err != nil {
		return vault.ImportCAResult{}, invalid(fmt.Sprintf("%s: %v", in.From, err))
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return vault.ImportCAResult{}, err
	}
	kv := cl.KVv2(cmp.Or(in.Vault.KV, "secret"))
	have, err := kvGet(ctx, kv, in.Path)
	if err != nil {
		return vault.ImportCAResult{}, classify("read the CA at "+in.Path, err)
	}
	if have != nil {
		kept, err := firstCert(have["certificate"])
		if err != nil || !bytes.Equal(kept.Raw, cert.Raw) {
			what := "an unreadable certificate"
			if err == nil {
				what = fmt.Sprintf("another CA (%q)", kept.Subject.CommonName)
			}
			return vault.ImportCAResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s already records %s, not %q from %s: Kedge does not replace a cluster's CA", in.Path, what, cert.Subject.CommonName, in.From),
				errtype.VaultConflict, nil)
		}
		if (have["keyInVault"] == "true") != in.KeyInVault || have["issuer"] == "" {
			return vault.ImportCAResult{}, invalid(fmt.Sprintf("%s records this CA differently (keyInVault %q, issuer %q)", in.Path, have["keyInVault"], have["issuer"]))
		}
		return vault.ImportCAResult{Certificate: have["certificate"], Issuer: have["issuer"]}, nil
	}

	mount := cmp.Or(in.Vault.PKI, "pki")
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
	sec, err := cl.Logical().WriteWithContext(ctx, mount+"/issuers/import/bundle", map[string]any{
		"pem_bundle": certPEM + strings.TrimSpace(in.PrivateKey) + "\n",
	})
	if err != nil {
		return vault.ImportCAResult{}, classify(fmt.Sprintf("import %q into %s", cert.Subject.CommonName, mount), err)
	}
	// A CA imported before (a run that stopped before recording it) is
	// not imported twice: Vault maps it to the issuer it already has.
	issuer := ""
	if sec != nil {
		if m, ok := sec.Data["mapping"].(map[string]any); ok {
			for id := range m {
				issuer = id
			}
		}
		if ids, ok := sec.Data["imported_issuers"].([]any); ok && len(ids) > 0 {
			issuer, _ = ids[0].(string)
		}
	}
	if issuer == "" {
		return vault.ImportCAResult{}, temporal.NewApplicationError(mount+"/issuers/import/bundle named no issuer", errtype.Vault)
	}
	keep := map[string]any{"certificate": certPEM, "issuer": issuer, "adoptedFrom": in.From}
	if in.KeyInVault {
		keep["keyInVault"] = "true"
	} else {
		keep["privateKey"] = strings.TrimSpace(in.PrivateKey) + "\n"
	}
	if _, err := kv.Put(ctx, in.Path, keep); err != nil {
		return vault.ImportCAResult{}, classify("keep the CA at "+in.Path, err)
	}
	return vault.ImportCAResult{Certificate: certPEM, Issuer: issuer, Created: true}, nil
}

// ImportKeyPair records an existing key pair at Path the way
// vault.key-pair keeps its own, so the cluster keeps signing with it. The
// same pair already there is fine; another is an ErrTypeConflict.
func (a *Activities) ImportKeyPair(ctx context.Context, in vault.ImportKeyPairInput) (created bool, err error) {
	if err := checkKeyPair(in.PrivateKey, in.PublicKey); err != nil {
		return false, invalid(fmt.Sprintf("%s: %v", in.From, err))
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return false, err
	}
	kv := cl.KVv2(cmp.Or(in.Vault.KV, "secret"))
	have, err := kvGet(ctx, kv, in.Path)
	if err != nil {
		return false, classify("read the key pair at "+in.Path, err)
	}
	if have != nil {
		if samePublicKey(have["publicKey"], in.PublicKey) {
			return false, nil
		}
		return false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s already records another key pair than %s's: Kedge does not replace a signing key", in.Path, in.From), errtype.VaultConflict, nil)
	}
	if _, err := kv.Put(ctx, in.Path, map[string]any{
		"privateKey": strings.TrimSpace(in.PrivateKey) + "\n", "publicKey": strings.TrimSpace(in.PublicKey) + "\n", "adoptedFrom": in.From,
	}); err != nil {
		return false, classify("keep the key pair at "+in.Path, err)
	}
	return true, nil
}

// checkCA parses a CA certificate and checks the key is its own.
func checkCA(certPEM, keyPEM string) (*x509.Certificate, error) {
	cert, err := firstCert(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%q is not a CA certificate (no CA basic constraint or certSign usage)", cert.Subject.CommonName)
	}
	key, err := ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !pubkey.Equal(key.Public(), cert.PublicKey) {
		return nil, fmt.Errorf("the key is not %q's", cert.Subject.CommonName)
	}
	return cert, nil
}

func checkKeyPair(privPEM, pubPEM string) error {
	key, err := ParsePrivateKey(privPEM)
	if err != nil {
		return err
	}
	pub, err := pubkey.Parse(pubPEM)
	if err != nil {
		return err
	}
	if !pubkey.Equal(key.Public(), pub) {
		return errors.New("the public key is not the private key's")
	}
	return nil
}

func samePublicKey(a, b string) bool {
	ka, err1 := pubkey.Parse(a)
	kb, err2 := pubkey.Parse(b)
	return err1 == nil && err2 == nil && pubkey.Equal(ka, kb)
}

func firstCert(s string) (*x509.Certificate, error) {
	for rest := []byte(s); ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no certificate in the PEM")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// ParsePrivateKey reads a PEM private key: PKCS #1 (RSA), SEC 1 (EC) or
// PKCS #8.
func ParsePrivateKey(s string) (crypto.Signer, error) {
	for rest := []byte(s); ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no private key in the PEM")
		}
		switch block.Type {
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			signer, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("a %T cannot sign", k)
			}
			return signer, nil
		}
	}
}

// PutIfAbsent records data at path in KV unless something is there.
func (a *Activities) PutIfAbsent(ctx context.Context, c target.Vault, path string, data map[string]any) error {
	cl, err := a.client(c)
	if err != nil {
		return err
	}
	kv := cl.KVv2(cmp.Or(c.KV, "secret"))
	have, err := kvGet(ctx, kv, path)
	if err != nil {
		return classify("read "+path, err)
	}
	if have != nil {
		return nil
	}
	if _, err := kv.Put(ctx, path, data); err != nil {
		return classify("write "+path, err)
	}
	return nil
}

// Put writes data at path in KV, a new version over what is there (KV v2
// keeps the earlier ones), and returns its version.
func (a *Activities) Put(ctx context.Context, c target.Vault, path string, data map[string]any) (int, error) {
	cl, err := a.client(c)
	if err != nil {
		return 0, err
	}
	s, err := cl.KVv2(cmp.Or(c.KV, "secret")).Put(ctx, path, data)
	if err != nil {
		return 0, classify("write "+path, err)
	}
	return s.VersionMetadata.Version, nil
}
