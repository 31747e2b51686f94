package vaultapi

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/vault"
)

// ClusterCA returns one of the cluster's CAs, creating it on first use
// (vault.cluster-ca): an intermediate CA under the PKI mount's root, its
// own issuer in the mount, recorded in KV v2 at Path. The cluster CA's key
// is exported once and kept there, because the controller-manager signs
// kubelet client certificates with it; a CA asked for with KeyInVault
// (etcd's) is made with its key inside Vault and only Vault signs with it.
// Every later call returns the same CA, so a re-run bootstrap or a renewal
// keeps the cluster's trust. Each Path is its own CA: kedge/clusters/NAME/ca
// and kedge/clusters/NAME/etcd-ca are two issuers that trust nothing of
// each other.
func (a *Activities) ClusterCA(ctx context.Context, in vault.ClusterCAInput) (vault.ClusterCAResult, error) {
	if strings.TrimSpace(in.Path) == "" || strings.TrimSpace(in.CommonName) == "" {
		return vault.ClusterCAResult{}, invalid("path and commonName are required")
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return vault.ClusterCAResult{}, err
	}
	kv := cl.KVv2(cmp.Or(in.Vault.KV, "secret"))
	if have, err := kvGet(ctx, kv, in.Path); err != nil {
		return vault.ClusterCAResult{}, classify("read the CA at "+in.Path, err)
	} else if have != nil {
		return storedCA(in, have)
	}
	if in.MustExist {
		return vault.ClusterCAResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("Vault keeps no CA at %s: adopt the cluster first (kedge run adopt), Kedge will not make a new CA for it", in.Path), errtype.NotAdopted, nil)
	}

	res, keep, err := newCA(ctx, cl, in)
	if err != nil {
		return vault.ClusterCAResult{}, err
	}
	if _, err := kv.Put(ctx, in.Path, keep); err != nil {
		return vault.ClusterCAResult{}, classify("keep the CA at "+in.Path, err)
	}
	return res, nil
}

// newCA makes a CA: an intermediate under the PKI mount's root, imported
// as an issuer of its own. It returns the CA and the record to keep in
// KV (certificate, issuer, and the key unless it stays in Vault).
func newCA(ctx context.Context, cl *vaultapi.Client, in vault.ClusterCAInput) (vault.ClusterCAResult, map[string]any, error) {
	mount := cmp.Or(in.Vault.PKI, "pki")
	logical := cl.Logical()
	generate := mount + "/intermediate/generate/exported"
	if in.KeyInVault {
		generate = mount + "/intermediate/generate/internal"
	}
	gen, err := logical.WriteWithContext(ctx, generate, map[string]any{
		"common_name": in.CommonName, "key_type": "ec", "key_bits": 256,
	})
	if err != nil {
		return vault.ClusterCAResult{}, nil, classify("generate the key of "+in.CommonName+" in "+mount, err)
	}
	csr, key := dataStr(gen, "csr"), dataStr(gen, "private_key")
	if csr == "" || (key == "" && !in.KeyInVault) {
		return vault.ClusterCAResult{}, nil, temporal.NewApplicationError(generate+" returned no CSR or key", errtype.Vault)
	}
	if in.KeyInVault {
		key = "" // never leaves Vault (an internal generate returns none anyway)
	}
	signed, err := logical.WriteWithContext(ctx, mount+"/root/sign-intermediate", map[string]any{
		"csr": csr, "common_name": in.CommonName, "ttl": cmp.Or(in.TTL, "87600h"), "format": "pem",
	})
	if err != nil {
		return vault.ClusterCAResult{}, nil, classify("sign "+in.CommonName+" with "+mount+"'s root", err)
	}
	cert := dataStr(signed, "certificate")
	set, err := logical.WriteWithContext(ctx, mount+"/intermediate/set-signed", map[string]any{"certificate": cert})
	if err != nil {
		return vault.ClusterCAResult{}, nil, classify("import "+in.CommonName+" into "+mount, err)
	}
	issuer := ""
	if set != nil {
		if ids, ok := set.Data["imported_issuers"].([]any); ok && len(ids) > 0 {
			issuer, _ = ids[0].(string)
		}
	}
	if issuer == "" {
		return vault.ClusterCAResult{}, nil, temporal.NewApplicationError(mount+"/intermediate/set-signed imported no issuer", errtype.Vault)
	}
	res := vault.ClusterCAResult{Certificate: strings.TrimSpace(cert) + "\n", Issuer: issuer, Created: true}
	keep := map[string]any{"certificate": res.Certificate, "issuer": issuer}
	if in.KeyInVault {
		keep["keyInVault"] = "true"
	} else {
		res.PrivateKey = strings.TrimSpace(key) + "\n"
		keep["privateKey"] = res.PrivateKey
	}
	return res, keep, nil
}

// storedCA is the CA recorded at in.Path. A CA whose key is in Vault is
// never handed out as one with a key, nor the other way round: a step that
// asks for the wrong kind names the wrong path.
func storedCA(in vault.ClusterCAInput, have map[string]string) (vault.ClusterCAResult, error) {
	res := vault.ClusterCAResult{Certificate: have["certificate"], Issuer: have["issuer"]}
	incomplete := func(want string) error {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s holds an incomplete CA (want %s)", in.Path, want), errtype.InvalidInput, nil)
	}
	inVault := have["keyInVault"] == "true"
	switch {
	case in.KeyInVault && !inVault:
		return vault.ClusterCAResult{}, invalid(fmt.Sprintf("%s holds a CA whose key was exported, not one kept in Vault (keyInVault)", in.Path))
	case !in.KeyInVault && inVault:
		return vault.ClusterCAResult{}, invalid(fmt.Sprintf("%s holds a CA whose key stays in Vault; set keyInVault to use it", in.Path))
	case inVault:
		if res.Certificate == "" || res.Issuer == "" {
			return vault.ClusterCAResult{}, incomplete("certificate, issuer")
		}
	default:
		res.PrivateKey = have["privateKey"]
		if res.Certificate == "" || res.PrivateKey == "" || res.Issuer == "" {
			return vault.ClusterCAResult{}, incomplete("certificate, privateKey, issuer")
		}
	}
	return res, nil
}

// KeyPair returns the ECDSA P-256 key pair kept at Path, creating it on
// first use (vault.key-pair): the service-account signing key, which must
// not change while tokens signed with it are in use.
func (a *Activities) KeyPair(ctx context.Context, in vault.KeyPairInput) (vault.KeyPairResult, error) {
	if strings.TrimSpace(in.Path) == "" {
		return vault.KeyPairResult{}, invalid("path is required")
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return vault.KeyPairResult{}, err
	}
	kv := cl.KVv2(cmp.Or(in.Vault.KV, "secret"))
	if have, err := kvGet(ctx, kv, in.Path); err != nil {
		return vault.KeyPairResult{}, classify("read the key pair at "+in.Path, err)
	} else if have != nil {
		if have["privateKey"] == "" || have["publicKey"] == "" {
			return vault.KeyPairResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s holds an incomplete key pair (want privateKey, publicKey)", in.Path), errtype.InvalidInput, nil)
		}
		return vault.KeyPairResult{PrivateKey: have["privateKey"], PublicKey: have["publicKey"]}, nil
	}
	if in.MustExist {
		return vault.KeyPairResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("Vault keeps no key pair at %s: adopt the cluster first (kedge run adopt), Kedge will not make a service-account key for it", in.Path), errtype.NotAdopted, nil)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return vault.KeyPairResult{}, err
	}
	priv, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return vault.KeyPairResult{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return vault.KeyPairResult{}, err
	}
	res := vault.KeyPairResult{
		PrivateKey: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: priv})),
		PublicKey:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
		Created:    true,
	}
	if _, err := kv.Put(ctx, in.Path, map[string]any{"privateKey": res.PrivateKey, "publicKey": res.PublicKey}); err != nil {
		return vault.KeyPairResult{}, classify("keep the key pair at "+in.Path, err)
	}
	return res, nil
}

// kvGet reads a KV v2 secret's data as strings; nil when there is none.
func kvGet(ctx context.Context, kv *vaultapi.KVv2, path string) (map[string]string, error) {
	s, err := kv.Get(ctx, path)
	if err != nil {
		if errors.Is(err, vaultapi.ErrSecretNotFound) {
			return nil, nil
		}
		return nil, err
	}
	out := map[string]string{}
	for k, v := range s.Data {
		if str, ok := v.(string); ok {
			out[k] = str
		}
	}
	return out, nil
}

func dataStr(s *vaultapi.Secret, key string) string {
	if s == nil || s.Data == nil {
		return ""
	}
	str, _ := s.Data[key].(string)
	return str
}

// signVerbatim issues a certificate whose subject carries organizations
// (Kubernetes groups such as system:masters), which Vault's issue endpoint
// cannot set per request: the key is made here, and Vault signs a CSR
// naming the subject verbatim. The key leaves the worker only sealed.
func signVerbatim(ctx context.Context, cl *vaultapi.Client, path string, in vault.IssueCertInput, life map[string]any) (*vaultapi.Secret, string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", err
	}
	tmpl := &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: in.CommonName, Organization: in.Organization},
		DNSNames: in.AltNames,
	}
	for _, ip := range in.IPSANs {
		parsed := net.ParseIP(ip)
		if parsed == nil {
			return nil, "", invalid(fmt.Sprintf("ipSANs: %q is not an IP address", ip))
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, parsed)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, k)
	if err != nil {
		return nil, "", err
	}
	req := map[string]any{"csr": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), "format": "pem"}
	maps.Copy(req, life)
	sec, err := cl.Logical().WriteWithContext(ctx, path, req)
	if err != nil {
		return nil, "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, "", err
	}
	return sec, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})), nil
}
