package pkihost

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/pki"
)

// Activities are the pki actions. They reach hosts and Vault through
// the host and Vault actions (the worker hands them its own), and need of
// them only what Hosts and Vault say.
type Activities struct {
	Hosts Hosts
	Vault Vault
	// Lister and Secrets serve pki.export-terraform.
	Lister  Lister
	Secrets Secrets
	// RotationDir is where pki.rotate-ca keeps each step's journal on the
	// host (default DefaultRotationDir).
	RotationDir string

	// root, in tests, is where the host's files are (prefixed to the
	// fixed paths of Typhoon's layout).
	root string
	// loseAfter, in tests, loses the worker after a write of
	// pki.rotate-ca's journal: plan, mark, install or done.
	loseAfter func(what string) error
}

// Hosts is what the pki actions do on a host: read and write a file, look
// at one's owner and mode, resolve its links, install a bundle of files
// all or none.
type Hosts interface {
	ReadFile(ctx context.Context, in host.ReadFileInput) (host.ReadFileResult, error)
	WriteFile(ctx context.Context, in host.WriteFileInput) (host.WriteFileResult, error)
	Stat(ctx context.Context, t target.SSH, path string) (host.FileStat, error)
	RealPath(ctx context.Context, t target.SSH, path string) (string, error)
	InstallBundle(ctx context.Context, in host.InstallBundleInput) (host.InstallBundleResult, error)
}

// Vault is what the pki actions do in the cluster's Vault: import a CA or
// a key pair, record a fact once, issue a certificate.
type Vault interface {
	ImportCA(ctx context.Context, in vault.ImportCAInput) (vault.ImportCAResult, error)
	ImportKeyPair(ctx context.Context, in vault.ImportKeyPairInput) (created bool, err error)
	PutIfAbsent(ctx context.Context, c target.Vault, path string, data map[string]any) error
	IssueCert(ctx context.Context, in vault.IssueCertInput) (vault.IssueCertResult, error)
}

// Where a cluster's CAs and keys are kept in Vault's KV: the paths
// vault.cluster-ca and vault.key-pair read, so every runbook uses the
// adopted ones.
func kvPath(cluster, what string) string { return "kedge/clusters/" + cluster + "/" + what }

var clusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func invalid(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
}

// Adopt takes a running cluster's trust into Vault (pki.adopt): the
// cluster CA and its key, read from the controller, become a PKI issuer
// and are recorded where vault.cluster-ca looks (kedge/clusters/NAME/ca);
// etcd's CA (its certificate from the controller, its key given) becomes
// an issuer whose key stays in Vault (…/etcd-ca); the service-account key
// pair is kept where vault.key-pair looks (…/service-account). From then
// on every runbook signs with the cluster's own CAs and tokens stay valid.
// A second run changes nothing; Vault already holding other CAs for the
// cluster is refused (VaultConflict) rather than replaced.
func (a *Activities) Adopt(ctx context.Context, in pki.AdoptInput) (pki.AdoptResult, error) {
	if !clusterName.MatchString(in.ClusterName) {
		return pki.AdoptResult{}, invalid(fmt.Sprintf("clusterName %q is not a DNS label", in.ClusterName))
	}
	need := []string{layout.FileClusterCA, layout.FileClusterCAKey, layout.FileServiceAccountK, layout.FileServiceAccountP}
	for _, f := range need {
		if in.Files[f] == "" {
			return pki.AdoptResult{}, invalid(fmt.Sprintf("files: the layout names no %s on %s (is it a controller?)", f, in.Target.Node))
		}
	}
	etcdCAPath := in.Files[layout.FileEtcdServerCA]
	if etcdCAPath == "" {
		etcdCAPath = in.Files[layout.FileEtcdClientCA]
	}
	if etcdCAPath == "" {
		return pki.AdoptResult{}, invalid(fmt.Sprintf("files: the layout names no etcd CA on %s", in.Target.Node))
	}
	aggPath := in.Files[layout.FileAggregationCA]
	if aggPath != "" && strings.TrimSpace(in.AggregationCAKey) == "" {
		return pki.AdoptResult{}, invalid(fmt.Sprintf("aggregationCAKey: the API server on %s trusts a front-proxy (aggregation) CA, %s (--requestheader-client-ca-file), and its client certificate comes from it: give that CA's key (Typhoon keeps it only in the Terraform state: module.bootstrap's tls_private_key aggregation-ca)", in.Target.Node, aggPath))
	}
	read := func(p string) (string, error) {
		r, err := a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: in.Target, Path: p})
		if err != nil {
			return "", err
		}
		return r.Content, nil
	}
	contents := map[string]string{}
	for _, f := range append(need, layout.FileEtcdClientCA) {
		p := in.Files[f]
		if f == layout.FileEtcdClientCA {
			p = etcdCAPath
		}
		c, err := read(p)
		if err != nil {
			return pki.AdoptResult{}, err
		}
		contents[f] = c
	}
	// The API server's etcd client CA and etcd's own must be one CA:
	// Kedge renews both sides from it.
	if other := in.Files[layout.FileEtcdClientCA]; other != "" && other != etcdCAPath {
		c, err := read(other)
		if err != nil {
			return pki.AdoptResult{}, err
		}
		if !sameCert(c, contents[layout.FileEtcdClientCA]) {
			return pki.AdoptResult{}, invalid(fmt.Sprintf("%s and %s on %s are different CAs: Kedge adopts one etcd CA", other, etcdCAPath, in.Target.Node))
		}
	}
	from := func(f string) string { return in.Target.Node + ":" + in.Files[f] }

	ca, err := a.Vault.ImportCA(ctx, vault.ImportCAInput{Vault: in.Vault, Path: kvPath(in.ClusterName, "ca"),
		Certificate: contents[layout.FileClusterCA], PrivateKey: contents[layout.FileClusterCAKey], From: from(layout.FileClusterCA)})
	if err != nil {
		return pki.AdoptResult{}, err
	}
	etcd, err := a.Vault.ImportCA(ctx, vault.ImportCAInput{Vault: in.Vault, Path: kvPath(in.ClusterName, "etcd-ca"),
		Certificate: contents[layout.FileEtcdClientCA], PrivateKey: in.EtcdCAKey, KeyInVault: true, From: in.Target.Node + ":" + etcdCAPath})
	if err != nil {
		return pki.AdoptResult{}, err
	}
	var agg vault.ImportCAResult
	if aggPath != "" {
		c, err := read(aggPath)
		if err != nil {
			return pki.AdoptResult{}, err
		}
		if agg, err = a.Vault.ImportCA(ctx, vault.ImportCAInput{Vault: in.Vault, Path: kvPath(in.ClusterName, "aggregation-ca"),
			Certificate: c, PrivateKey: in.AggregationCAKey, KeyInVault: true, From: from(layout.FileAggregationCA)}); err != nil {
			return pki.AdoptResult{}, err
		}
	}
	sa, err := a.Vault.ImportKeyPair(ctx, vault.ImportKeyPairInput{Vault: in.Vault, Path: kvPath(in.ClusterName, "service-account"),
		PrivateKey: contents[layout.FileServiceAccountK], PublicKey: contents[layout.FileServiceAccountP], From: from(layout.FileServiceAccountK)})
	if err != nil {
		return pki.AdoptResult{}, err
	}
	if err := a.Vault.PutIfAbsent(ctx, in.Vault, kvPath(in.ClusterName, "adopted"), map[string]any{
		"from": in.Target.Node, "apiServer": in.APIServer, "at": time.Now().UTC().Format(time.RFC3339),
	}); err != nil {
		return pki.AdoptResult{}, err
	}
	return pki.AdoptResult{Issuer: ca.Issuer, Certificate: ca.Certificate, EtcdIssuer: etcd.Issuer, EtcdCertificate: etcd.Certificate,
		AggregationIssuer: agg.Issuer, AggregationCertificate: agg.Certificate,
		ServiceAccountPublicKey: contents[layout.FileServiceAccountP], Created: ca.Created || etcd.Created || agg.Created || sa}, nil
}

func sameCert(a, b string) bool {
	ca, err1 := firstCert([]byte(a))
	cb, err2 := firstCert([]byte(b))
	return err1 == nil && err2 == nil && ca.Equal(cb)
}

func firstCert(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no certificate in the PEM")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}
