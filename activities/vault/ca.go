package vault

import (
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
)

// Cluster key material kept in Vault.
const (
	ClusterCAAction = "vault.cluster-ca"
	KeyPairAction   = "vault.key-pair"
)

// ClusterCAInput asks for the cluster's signing CA.
type ClusterCAInput struct {
	Vault      Config `json:"vault"`
	Path       string `json:"path" kedge:"required" doc:"KV path that keeps the CA, e.g. kedge/clusters/mercury/ca"`
	CommonName string `json:"commonName" kedge:"required" doc:"the CA's CN, e.g. mercury kubernetes CA"`
	TTL        string `json:"ttl,omitempty" kedge:"duration" doc:"the CA's lifetime (default 87600h)"`
	// KeyInVault makes the CA's key inside Vault, where it stays: for a
	// CA nobody but Vault signs with, such as etcd's. The result's
	// PrivateKey is then empty and KV keeps only the certificate and the
	// issuer.
	KeyInVault bool `json:"keyInVault,omitempty" doc:"make the key inside Vault and never export it (a CA only Vault signs with, e.g. etcd's); privateKey is then empty"`
	// MustExist refuses to make the CA: a cluster Kedge adopted signs
	// with its own CA or not at all.
	MustExist bool `json:"mustExist,omitempty" doc:"fail (NotAdopted) instead of making a CA when Vault keeps none at path: for clusters Kedge adopted"`
}

// ClusterCAResult is the cluster CA. PrivateKey is sealed by the payload
// codec in Temporal; it goes to the controllers only (the
// controller-manager signs kubelet certificates with it). It is empty for
// a CA made with KeyInVault.
type ClusterCAResult struct {
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"privateKey"`
	// Issuer is the CA's issuer id in the PKI mount: vault.issue-cert with
	// this issuer signs with this CA.
	Issuer  string `json:"issuer"`
	Created bool   `json:"created"`
}

// KeyPairInput asks for a key pair kept in Vault.
type KeyPairInput struct {
	Vault Config `json:"vault"`
	Path  string `json:"path" kedge:"required" doc:"KV path that keeps the key pair, e.g. kedge/clusters/mercury/service-account"`
}

// KeyPairResult is a PEM private key (sealed in Temporal) and its public
// key.
type KeyPairResult struct {
	PrivateKey string `json:"privateKey"`
	PublicKey  string `json:"publicKey"`
	Created    bool   `json:"created"`
}

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
func (a *Activities) ClusterCA(ctx context.Context, in ClusterCAInput) (ClusterCAResult, error) {
	if strings.TrimSpace(in.Path) == "" || strings.TrimSpace(in.CommonName) == "" {
		return ClusterCAResult{}, invalid("path and commonName are required")
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return ClusterCAResult{}, err
	}
	kv := cl.KVv2(orDefault(in.Vault.KV, "secret"))
	if have, err := kvGet(ctx, kv, in.Path); err != nil {
		return ClusterCAResult{}, classify("read the CA at "+in.Path, err)
	} else if have != nil {
		return storedCA(in, have)
	}
	if in.MustExist {
		return ClusterCAResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("Vault keeps no CA at %s: adopt the cluster first (kedge run adopt), Kedge will not make a new CA for it", in.Path), ErrTypeNotAdopted, nil)
	}

	mount := orDefault(in.Vault.PKI, "pki")
	logical := cl.Logical()
	generate := mount + "/intermediate/generate/exported"
	if in.KeyInVault {
		generate = mount + "/intermediate/generate/internal"
	}
	gen, err := logical.WriteWithContext(ctx, generate, map[string]any{
		"common_name": in.CommonName, "key_type": "ec", "key_bits": 256,
	})
	if err != nil {
		return ClusterCAResult{}, classify("generate the key of "+in.CommonName+" in "+mount, err)
	}
	csr, key := dataStr(gen, "csr"), dataStr(gen, "private_key")
	if csr == "" || (key == "" && !in.KeyInVault) {
		return ClusterCAResult{}, temporal.NewApplicationError(generate+" returned no CSR or key", ErrTypeVault)
	}
	if in.KeyInVault {
		key = "" // never leaves Vault (an internal generate returns none anyway)
	}
	signed, err := logical.WriteWithContext(ctx, mount+"/root/sign-intermediate", map[string]any{
		"csr": csr, "common_name": in.CommonName, "ttl": orDefault(in.TTL, "87600h"), "format": "pem",
	})
	if err != nil {
		return ClusterCAResult{}, classify("sign "+in.CommonName+" with "+mount+"'s root", err)
	}
	cert := dataStr(signed, "certificate")
	set, err := logical.WriteWithContext(ctx, mount+"/intermediate/set-signed", map[string]any{"certificate": cert})
	if err != nil {
		return ClusterCAResult{}, classify("import "+in.CommonName+" into "+mount, err)
	}
	issuer := ""
	if set != nil {
		if ids, ok := set.Data["imported_issuers"].([]any); ok && len(ids) > 0 {
			issuer, _ = ids[0].(string)
		}
	}
	if issuer == "" {
		return ClusterCAResult{}, temporal.NewApplicationError(mount+"/intermediate/set-signed imported no issuer", ErrTypeVault)
	}
	res := ClusterCAResult{Certificate: strings.TrimSpace(cert) + "\n", Issuer: issuer, Created: true}
	keep := map[string]any{"certificate": res.Certificate, "issuer": issuer}
	if in.KeyInVault {
		keep["keyInVault"] = "true"
	} else {
		res.PrivateKey = strings.TrimSpace(key) + "\n"
		keep["privateKey"] = res.PrivateKey
	}
	if _, err := kv.Put(ctx, in.Path, keep); err != nil {
		return ClusterCAResult{}, classify("keep the CA at "+in.Path, err)
	}
	return res, nil
}

// storedCA is the CA recorded at in.Path. A CA whose key is in Vault is
// never handed out as one with a key, nor the other way round: a step that
// asks for the wrong kind names the wrong path.
func storedCA(in ClusterCAInput, have map[string]string) (ClusterCAResult, error) {
	res := ClusterCAResult{Certificate: have["certificate"], Issuer: have["issuer"]}
	incomplete := func(want string) error {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s holds an incomplete CA (want %s)", in.Path, want), ErrTypeInvalidInput, nil)
	}
	inVault := have["keyInVault"] == "true"
	switch {
	case in.KeyInVault && !inVault:
		return ClusterCAResult{}, invalid(fmt.Sprintf("%s holds a CA whose key was exported, not one kept in Vault (keyInVault)", in.Path))
	case !in.KeyInVault && inVault:
		return ClusterCAResult{}, invalid(fmt.Sprintf("%s holds a CA whose key stays in Vault; set keyInVault to use it", in.Path))
	case inVault:
		if res.Certificate == "" || res.Issuer == "" {
			return ClusterCAResult{}, incomplete("certificate, issuer")
		}
	default:
		res.PrivateKey = have["privateKey"]
		if res.Certificate == "" || res.PrivateKey == "" || res.Issuer == "" {
			return ClusterCAResult{}, incomplete("certificate, privateKey, issuer")
		}
	}
	return res, nil
}

// KeyPair returns the ECDSA P-256 key pair kept at Path, creating it on
// first use (vault.key-pair): the service-account signing key, which must
// not change while tokens signed with it are in use.
func (a *Activities) KeyPair(ctx context.Context, in KeyPairInput) (KeyPairResult, error) {
	if strings.TrimSpace(in.Path) == "" {
		return KeyPairResult{}, invalid("path is required")
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return KeyPairResult{}, err
	}
	kv := cl.KVv2(orDefault(in.Vault.KV, "secret"))
	if have, err := kvGet(ctx, kv, in.Path); err != nil {
		return KeyPairResult{}, classify("read the key pair at "+in.Path, err)
	} else if have != nil {
		if have["privateKey"] == "" || have["publicKey"] == "" {
			return KeyPairResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s holds an incomplete key pair (want privateKey, publicKey)", in.Path), ErrTypeInvalidInput, nil)
		}
		return KeyPairResult{PrivateKey: have["privateKey"], PublicKey: have["publicKey"]}, nil
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPairResult{}, err
	}
	priv, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return KeyPairResult{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return KeyPairResult{}, err
	}
	res := KeyPairResult{
		PrivateKey: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: priv})),
		PublicKey:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
		Created:    true,
	}
	if _, err := kv.Put(ctx, in.Path, map[string]any{"privateKey": res.PrivateKey, "publicKey": res.PublicKey}); err != nil {
		return KeyPairResult{}, classify("keep the key pair at "+in.Path, err)
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
func signVerbatim(ctx context.Context, cl *vaultapi.Client, path string, in IssueCertInput, life map[string]any) (*vaultapi.Secret, string, error) {
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
