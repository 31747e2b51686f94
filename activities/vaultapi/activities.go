package vaultapi

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/secretfile"

	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/actions/vault"
)

// Activities are the Vault actions. Clients are built once per Vault
// address and CA; the token is read on every call, so a renewed token file
// is picked up without a restart.
type Activities struct {
	mu      sync.Mutex
	clients map[string]*vaultapi.Client
	certs   map[string]loginCert // SSH login certificates, by CA and user
}

func invalid(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
}

func (a *Activities) client(c target.Vault) (*vaultapi.Client, error) {
	if c.Address == "" {
		return nil, invalid("the inventory names no vault.address")
	}
	token, err := readToken(c)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := c.Address + "|" + c.CAFile
	base, ok := a.clients[key]
	if !ok {
		cfg := vaultapi.DefaultConfig()
		cfg.Address = c.Address
		cfg.MaxRetries = 0 // the step's retry policy retries
		cfg.Timeout = 30 * time.Second
		if c.CAFile != "" {
			if err := cfg.ConfigureTLS(&vaultapi.TLSConfig{CACert: c.CAFile}); err != nil {
				return nil, invalid(fmt.Sprintf("vault.caFile %s: %v", c.CAFile, err))
			}
		}
		base, err = vaultapi.NewClient(cfg)
		if err != nil {
			return nil, invalid(fmt.Sprintf("vault at %s: %v", c.Address, err))
		}
		base.ClearToken()
		if a.clients == nil {
			a.clients = map[string]*vaultapi.Client{}
		}
		a.clients[key] = base
	}
	cl, err := base.Clone()
	if err != nil {
		return nil, err
	}
	cl.SetToken(token)
	return cl, nil
}

func readToken(c target.Vault) (string, error) {
	if c.TokenFile != "" {
		data, err := secretfile.Read(c.TokenFile)
		if err != nil {
			return "", invalid(fmt.Sprintf("vault.tokenFile: %v", err))
		}
		if t := strings.TrimSpace(string(data)); t != "" {
			return t, nil
		}
		return "", invalid(fmt.Sprintf("vault.tokenFile %s is empty", c.TokenFile))
	}
	if t := os.Getenv("VAULT_TOKEN"); t != "" {
		return t, nil
	}
	return "", invalid("no Vault token: set vault.tokenFile in the inventory or VAULT_TOKEN for the worker")
}

// classify turns a Vault error into a typed Temporal error, once.
func classify(op string, err error) error {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("%s: vault answered %d: %s", op, re.StatusCode, strings.Join(re.Errors, "; "))
		switch re.StatusCode {
		case http.StatusForbidden, http.StatusUnauthorized:
			return temporal.NewNonRetryableApplicationError(msg, errtype.VaultDenied, nil)
		case http.StatusNotFound:
			return temporal.NewNonRetryableApplicationError(msg, errtype.VaultNotFound, nil)
		case http.StatusBadRequest:
			return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
		}
		return temporal.NewApplicationError(msg, errtype.Vault)
	}
	return temporal.NewApplicationError(fmt.Sprintf("%s: %v", op, err), errtype.Vault)
}

// IssueCert issues a certificate and key from the PKI engine
// (vault.issue-cert).
func (a *Activities) IssueCert(ctx context.Context, in vault.IssueCertInput) (vault.IssueCertResult, error) {
	if strings.TrimSpace(in.CommonName) == "" {
		return vault.IssueCertResult{}, invalid("commonName is required")
	}
	dns, ips, err := in.Names()
	if err != nil {
		return vault.IssueCertResult{}, invalid(err.Error())
	}
	in.AltNames, in.IPSANs, in.SANs = dns, ips, nil
	cl, err := a.client(in.Vault)
	if err != nil {
		return vault.IssueCertResult{}, err
	}
	mount := cmp.Or(in.Vault.PKI, "pki")
	role := cmp.Or(in.Role, cmp.Or(in.Vault.Role, "kubernetes"))
	req := map[string]any{"common_name": in.CommonName, "format": "pem"}
	if len(in.AltNames) > 0 {
		req["alt_names"] = strings.Join(in.AltNames, ",")
	}
	if len(in.IPSANs) > 0 {
		req["ip_sans"] = strings.Join(in.IPSANs, ",")
	}
	life, capped, err := leafLifetime(ctx, cl, mount, in)
	if err != nil {
		return vault.IssueCertResult{}, err
	}
	maps.Copy(req, life)
	base := mount
	if in.Issuer != "" {
		base = mount + "/issuer/" + in.Issuer
	}
	var sec *vaultapi.Secret
	var key string
	if len(in.Organization) > 0 || in.Verbatim {
		path := base + "/sign-verbatim/" + role
		sec, key, err = signVerbatim(ctx, cl, path, in, life)
		if err != nil {
			return vault.IssueCertResult{}, classify(fmt.Sprintf("sign %s (O=%s) at %s", in.CommonName, strings.Join(in.Organization, ","), path), err)
		}
	} else {
		op := fmt.Sprintf("issue %s from %s/issue/%s", in.CommonName, base, role)
		if sec, err = cl.Logical().WriteWithContext(ctx, base+"/issue/"+role, req); err != nil {
			return vault.IssueCertResult{}, classify(op, err)
		}
	}
	op := "issue " + in.CommonName
	if sec == nil || sec.Data == nil {
		return vault.IssueCertResult{}, temporal.NewApplicationError(op+": empty answer", errtype.Vault)
	}
	str := func(k string) string { s, _ := sec.Data[k].(string); return s }
	if key == "" {
		key = str("private_key")
	}
	res := vault.IssueCertResult{Certificate: str("certificate"), PrivateKey: key, CA: str("issuing_ca"), Serial: str("serial_number")}
	if chain, ok := sec.Data["ca_chain"].([]any); ok && len(chain) > 0 {
		var parts []string
		for _, c := range chain {
			if s, ok := c.(string); ok {
				parts = append(parts, s)
			}
		}
		res.CA = strings.Join(parts, "\n")
	}
	block, _ := pem.Decode([]byte(res.Certificate))
	if block == nil || res.PrivateKey == "" {
		return vault.IssueCertResult{}, temporal.NewApplicationError(op+": no certificate or key in the answer", errtype.Vault)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return vault.IssueCertResult{}, temporal.NewApplicationError(op+": "+err.Error(), errtype.Vault)
	}
	res.NotAfter = cert.NotAfter.UTC().Format(time.RFC3339)
	res.Capped = capped
	return res, nil
}

// ReadSecret reads a KV v2 secret (vault.read-secret).
func (a *Activities) ReadSecret(ctx context.Context, in vault.ReadSecretInput) (vault.ReadSecretResult, error) {
	if strings.TrimSpace(in.Path) == "" {
		return vault.ReadSecretResult{}, invalid("path is required")
	}
	cl, err := a.client(in.Vault)
	if err != nil {
		return vault.ReadSecretResult{}, err
	}
	mount := cmp.Or(in.Vault.KV, "secret")
	kv := cl.KVv2(mount)
	op := fmt.Sprintf("read %s/%s", mount, in.Path)
	var sec *vaultapi.KVSecret
	if in.Version > 0 {
		sec, err = kv.GetVersion(ctx, in.Path, in.Version)
	} else {
		sec, err = kv.Get(ctx, in.Path)
	}
	if errors.Is(err, vaultapi.ErrSecretNotFound) {
		return vault.ReadSecretResult{}, temporal.NewNonRetryableApplicationError(op+": no such secret", errtype.VaultNotFound, nil)
	}
	if err != nil {
		return vault.ReadSecretResult{}, classify(op, err)
	}
	res := vault.ReadSecretResult{Data: map[string]string{}}
	if sec.VersionMetadata != nil {
		res.Version = sec.VersionMetadata.Version
	}
	for k, v := range sec.Data {
		switch x := v.(type) {
		case string:
			res.Data[k] = x
		default:
			b, _ := json.Marshal(x)
			res.Data[k] = string(b)
		}
	}
	return res, nil
}
