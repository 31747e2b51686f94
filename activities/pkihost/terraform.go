package pkihost

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/internal/certfile"

	"kedge.dev/kedge/actions/pki"
)

// Lister lists a directory's files on a host (host.Activities does).
type Lister interface {
	ListFiles(ctx context.Context, t target.SSH, dir string) ([]string, error)
}

// Secrets writes a KV secret in the cluster's Vault, a new version.
type Secrets interface {
	Put(ctx context.Context, c target.Vault, path string, data map[string]any) (int, error)
}

// Where Typhoon's /opt/bootstrap/layout unpacks each part of
// terraform-render-bootstrap's assets_dist on a controller: the bundle's
// names as Terraform gives them, and the files they became.
var (
	typhoonAssetFiles = map[string]string{
		"auth/admin.conf":              "/etc/kubernetes/pki/admin.conf",
		"auth/controller-manager.conf": "/etc/kubernetes/pki/controller-manager.conf",
		"auth/scheduler.conf":          "/etc/kubernetes/pki/scheduler.conf",
		"tls/k8s/ca.crt":               "/etc/kubernetes/pki/ca.crt",
		"tls/k8s/ca.key":               "/etc/kubernetes/pki/ca.key",
		"tls/k8s/apiserver.crt":        "/etc/kubernetes/pki/apiserver.crt",
		"tls/k8s/apiserver.key":        "/etc/kubernetes/pki/apiserver.key",
		"tls/k8s/service-account.pub":  "/etc/kubernetes/pki/service-account.pub",
		"tls/k8s/service-account.key":  "/etc/kubernetes/pki/service-account.key",
		"tls/etcd/etcd-client-ca.crt":  "/etc/kubernetes/pki/etcd-client-ca.crt",
		"tls/etcd/etcd-client.crt":     "/etc/kubernetes/pki/etcd-client.crt",
		"tls/etcd/etcd-client.key":     "/etc/kubernetes/pki/etcd-client.key",
		"tls/etcd/server-ca.crt":       "/etc/ssl/etcd/etcd/server-ca.crt",
		"tls/etcd/server.crt":          "/etc/ssl/etcd/etcd/server.crt",
		"tls/etcd/server.key":          "/etc/ssl/etcd/etcd/server.key",
		"tls/etcd/peer-ca.crt":         "/etc/ssl/etcd/etcd/peer-ca.crt",
		"tls/etcd/peer.crt":            "/etc/ssl/etcd/etcd/peer.crt",
		"tls/etcd/peer.key":            "/etc/ssl/etcd/etcd/peer.key",
	}
	// Only where the cluster has aggregation (Typhoon's default).
	typhoonAggregationFiles = map[string]string{
		"tls/k8s/aggregation-ca.crt":     "/etc/kubernetes/pki/aggregation-ca.crt",
		"tls/k8s/aggregation-client.crt": "/etc/kubernetes/pki/aggregation-client.crt",
		"tls/k8s/aggregation-client.key": "/etc/kubernetes/pki/aggregation-client.key",
	}
	// Directories unpacked whole: static-manifests/* and manifests/**.
	typhoonAssetDirs = map[string]string{
		"static-manifests": "/etc/kubernetes/manifests",
		"manifests":        "/opt/bootstrap/assets/manifests",
	}
	// The kubelets' bootstrap kubeconfig Typhoon's ssh.tf copies to
	// every node.
	typhoonBootstrapKubeconfig = "/etc/kubernetes/kubeconfig"
)

// ExportTerraform reads from a Typhoon controller, once a CA rotation has
// dropped the old CAs, what Typhoon's Terraform would hand out — the
// kubelets' bootstrap kubeconfig (kubeconfig-kubelet), the admin
// kubeconfig (kubeconfig-admin) and the assets bundle a controller it
// (re)creates is given (assets_dist, in ssh.tf's one-file form) — checks
// that it holds the rotated trust alone, whole and consistent, and keeps
// it in the cluster's Vault (pki.export-terraform). Terraform still holds
// the old PKI in its state: these are what to give it instead. Nothing is
// written when a check fails.
func (a *Activities) ExportTerraform(ctx context.Context, in pki.ExportTerraformInput) (pki.ExportTerraformResult, error) {
	if in.Kind != layout.KindTyphoonFlatcar && in.Kind != layout.KindTyphoonFCOS {
		return pki.ExportTerraformResult{}, invalid(fmt.Sprintf("kind %q: only a Typhoon controller's files are what Typhoon's Terraform hands out", in.Kind))
	}
	if !strings.HasPrefix(in.Path, "kedge/clusters/") || climbsPath(in.Path) {
		return pki.ExportTerraformResult{}, invalid(fmt.Sprintf("path %q: want kedge/clusters/NAME/...", in.Path))
	}
	ca, err := onlyCert(in.CA)
	if err != nil {
		return pki.ExportTerraformResult{}, invalid("ca: " + err.Error())
	}
	t := in.Target
	read := func(p string) (string, error) {
		r, err := a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: in.Target, Path: a.root + p, MaxBytes: 1 << 20})
		return r.Content, err
	}
	files := maps.Clone(typhoonAssetFiles)
	if st, err := a.Hosts.Stat(ctx, t, a.root+typhoonAggregationFiles["tls/k8s/aggregation-ca.crt"]); err != nil {
		return pki.ExportTerraformResult{}, err
	} else if st.Exists {
		maps.Copy(files, typhoonAggregationFiles)
	}
	for prefix, dir := range typhoonAssetDirs {
		names, err := a.Lister.ListFiles(ctx, t, a.root+dir)
		if err != nil {
			return pki.ExportTerraformResult{}, err
		}
		if len(names) == 0 {
			return pki.ExportTerraformResult{}, invalid(fmt.Sprintf("%s on %s holds no file: not a controller Typhoon laid out", dir, in.Target.Node))
		}
		for _, n := range names {
			files[prefix+"/"+n] = dir + "/" + n
		}
	}
	assets := map[string]string{}
	for name, p := range files {
		c, err := read(p)
		if err != nil {
			return pki.ExportTerraformResult{}, err
		}
		assets[name] = c
	}
	kubelet, err := read(typhoonBootstrapKubeconfig)
	if err != nil {
		return pki.ExportTerraformResult{}, err
	}
	tokenID, err := checkExport(assets, kubelet, ca)
	if err != nil {
		return pki.ExportTerraformResult{}, invalid(fmt.Sprintf("%s's files are not a rotated whole to export: %v", in.Target.Node, err))
	}
	data := map[string]any{
		"kubeconfig-kubelet": kubelet,
		"kubeconfig-admin":   assets["auth/admin.conf"],
		"assets":             AssetsBundle(assets),
	}
	version, err := a.Secrets.Put(ctx, in.Vault, in.Path, data)
	if err != nil {
		return pki.ExportTerraformResult{}, err
	}
	return pki.ExportTerraformResult{Path: in.Path, Version: version, Fields: slices.Sorted(maps.Keys(data)),
		Assets: slices.Sorted(maps.Keys(assets)), TokenID: tokenID}, nil
}

// AssetsBundle is assets in the one file Typhoon's ssh.tf copies to a
// controller: each entry "##### NAME" and its content, in Terraform's
// (sorted) order, joined by newlines, as /opt/bootstrap/layout unpacks.
func AssetsBundle(assets map[string]string) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(assets)) {
		parts = append(parts, "##### "+name+"\n"+assets[name])
	}
	return strings.Join(parts, "\n")
}

// checkExport checks what is about to be exported: the cluster CA alone
// (ca), every kubeconfig trusting it, every certificate issued by its CA
// and matching its key; it gives the bootstrap token's id.
func checkExport(assets map[string]string, kubelet string, ca *x509.Certificate) (string, error) {
	if got, err := onlyCert(assets["tls/k8s/ca.crt"]); err != nil {
		return "", fmt.Errorf("tls/k8s/ca.crt: %w", err)
	} else if !got.Equal(ca) {
		return "", fmt.Errorf("tls/k8s/ca.crt is %q, not the cluster CA Vault keeps", got.Subject.CommonName)
	}
	if _, err := tls.X509KeyPair([]byte(assets["tls/k8s/ca.crt"]), []byte(assets["tls/k8s/ca.key"])); err != nil {
		return "", fmt.Errorf("tls/k8s/ca.key is not tls/k8s/ca.crt's key: %w", err)
	}
	etcdCA, err := onlyCert(assets["tls/etcd/server-ca.crt"])
	if err != nil {
		return "", fmt.Errorf("tls/etcd/server-ca.crt: %w", err)
	}
	for _, other := range []string{"tls/etcd/peer-ca.crt", "tls/etcd/etcd-client-ca.crt"} {
		if c, err := onlyCert(assets[other]); err != nil {
			return "", fmt.Errorf("%s is not tls/etcd/server-ca.crt alone (%w)", other, err)
		} else if !c.Equal(etcdCA) {
			return "", fmt.Errorf("%s is not tls/etcd/server-ca.crt alone", other)
		}
	}
	pairs := map[string]*x509.Certificate{"tls/k8s/apiserver": ca, "tls/etcd/server": etcdCA, "tls/etcd/peer": etcdCA, "tls/etcd/etcd-client": etcdCA}
	if _, ok := assets["tls/k8s/aggregation-ca.crt"]; ok {
		agg, err := onlyCert(assets["tls/k8s/aggregation-ca.crt"])
		if err != nil {
			return "", fmt.Errorf("tls/k8s/aggregation-ca.crt: %w", err)
		}
		pairs["tls/k8s/aggregation-client"] = agg
	}
	for name, issuer := range pairs {
		if err := issuedPair(assets[name+".crt"], assets[name+".key"], issuer); err != nil {
			return "", fmt.Errorf("%s.crt: %w", name, err)
		}
	}
	if b, _ := pem.Decode([]byte(assets["tls/k8s/service-account.pub"])); b == nil {
		return "", errors.New("tls/k8s/service-account.pub holds no PEM block")
	} else if _, err := x509.ParsePKIXPublicKey(b.Bytes); err != nil {
		return "", fmt.Errorf("tls/k8s/service-account.pub: %w", err)
	}
	for _, name := range []string{"auth/admin.conf", "auth/controller-manager.conf", "auth/scheduler.conf"} {
		kc, err := parseExportKubeconfig(assets[name], ca)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		if err := issuedPair(kc.cert, kc.key, ca); err != nil {
			return "", fmt.Errorf("%s's client certificate: %w", name, err)
		}
	}
	kc, err := parseExportKubeconfig(kubelet, ca)
	if err != nil {
		return "", fmt.Errorf("%s: %w", typhoonBootstrapKubeconfig, err)
	}
	id, _, ok := strings.Cut(kc.token, ".")
	if !ok || id == "" {
		return "", fmt.Errorf("%s holds no bootstrap token (ID.SECRET)", typhoonBootstrapKubeconfig)
	}
	return id, nil
}

type exportKubeconfig struct{ cert, key, token string }

// parseExportKubeconfig reads a one-cluster, one-user kubeconfig whose
// CA data must be ca alone.
func parseExportKubeconfig(doc string, ca *x509.Certificate) (exportKubeconfig, error) {
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CAData string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Token    string `yaml:"token"`
				CertData string `yaml:"client-certificate-data"`
				KeyData  string `yaml:"client-key-data"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal([]byte(doc), &kc); err != nil {
		return exportKubeconfig{}, err
	}
	if len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		return exportKubeconfig{}, fmt.Errorf("want one cluster and one user, have %d and %d", len(kc.Clusters), len(kc.Users))
	}
	if !strings.HasPrefix(kc.Clusters[0].Cluster.Server, "https://") {
		return exportKubeconfig{}, fmt.Errorf("server %q is not https", kc.Clusters[0].Cluster.Server)
	}
	caPEM, err := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CAData)
	if err != nil {
		return exportKubeconfig{}, fmt.Errorf("certificate-authority-data: %w", err)
	}
	if got, err := onlyCert(string(caPEM)); err != nil {
		return exportKubeconfig{}, fmt.Errorf("certificate-authority-data: %w", err)
	} else if !got.Equal(ca) {
		return exportKubeconfig{}, fmt.Errorf("certificate-authority-data is %q, not the cluster CA", got.Subject.CommonName)
	}
	u := kc.Users[0].User
	cert, _ := base64.StdEncoding.DecodeString(u.CertData)
	key, _ := base64.StdEncoding.DecodeString(u.KeyData)
	return exportKubeconfig{cert: string(cert), key: string(key), token: u.Token}, nil
}

// issuedPair checks that certPEM is issued by issuer and keyPEM is its key.
func issuedPair(certPEM, keyPEM string, issuer *x509.Certificate) error {
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	if err := leaf.CheckSignatureFrom(issuer); err != nil {
		return fmt.Errorf("not issued by %q: %w", issuer.Subject.CommonName, err)
	}
	return nil
}

// onlyCert parses a PEM file of exactly one certificate.
func onlyCert(s string) (*x509.Certificate, error) {
	certs, err := certfile.Parse([]byte(s))
	if err != nil {
		return nil, err
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("holds %d certificates, want one (a bundle: has the rotation dropped the old CA?)", len(certs))
	}
	return certs[0], nil
}

// climbsPath says whether a KV path has an empty, "." or ".." part.
func climbsPath(p string) bool {
	return slices.ContainsFunc(strings.Split(p, "/"), func(s string) bool { return s == "" || s == "." || s == ".." }) || path.Clean(p) != p
}
