package kubeapi

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kedge.dev/kedge/internal/secretfile"
)

// maxFileBytes bounds the certificate files a kubeconfig names: a CA
// bundle is small.
const maxFileBytes = 1 << 20

// RefusedError is a kubeconfig refused for what it holds, naming the
// file and the field.
type RefusedError struct {
	Path   string // the kubeconfig ("" for content not yet saved)
	Field  string // e.g. users[admin].exec
	Reason string
}

func (e *RefusedError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("kubeconfig %s: %s: %s", e.Path, e.Field, e.Reason)
}

// LoadConfig builds the client configuration of the kubeconfig at path
// (its context kubeContext, or its current context), reading every file
// itself and handing client-go only embedded data, so nothing in the
// file runs a program or reads another file behind the worker's back.
//
// Refused (*RefusedError), before anything is dialled: a kubeconfig that
// is not the worker's own secret (secretfile: mode 0600 or 0400, owned by
// the worker's user or root), a user with an exec credential plugin, an
// auth-provider or a tokenFile, and a certificate-authority,
// client-certificate or client-key file outside the kubeconfig's own
// directory (the one the worker's inventory names it in) or that is not
// what it says: certificates that are not PEM certificates, a client key
// that is not the worker's own secret. Every entry is checked, not only
// the context used.
func LoadConfig(path, kubeContext string) (*rest.Config, error) {
	data, err := secretfile.Read(path)
	var me *secretfile.ModeError
	var oe *secretfile.OwnerError
	switch {
	case errors.As(err, &me), errors.As(err, &oe):
		return nil, &RefusedError{Path: path, Field: "the file", Reason: err.Error()}
	case err != nil:
		return nil, err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	r := embedder{path: path, dir: dir}
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		if err := r.user(name, cfg.AuthInfos[name]); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		if err := r.cluster(name, cfg.Clusters[name]); err != nil {
			return nil, err
		}
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, kubeContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return rc, nil
}

// embedder checks a loaded kubeconfig's entries and replaces each file
// they name with its content.
type embedder struct {
	path string // the kubeconfig
	dir  string // its directory: where the files it names must be
}

func (r embedder) refuse(field, format string, args ...any) error {
	return &RefusedError{Path: r.path, Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (r embedder) user(name string, u *clientcmdapi.AuthInfo) error {
	field := "users[" + name + "]"
	switch {
	case u.Exec != nil:
		return r.refuse(field+".exec", "an exec credential plugin (%q) would run as the worker: embed client-certificate-data and client-key-data, or a token, instead", u.Exec.Command)
	case u.AuthProvider != nil:
		return r.refuse(field+".auth-provider", "an auth-provider (%q) acts with the worker's files and network: embed client-certificate-data and client-key-data, or a token, instead", u.AuthProvider.Name)
	case u.TokenFile != "":
		return r.refuse(field+".tokenFile", "a token file (%s) would send whatever that file holds as a bearer token: embed the token instead", u.TokenFile)
	}
	if u.ClientCertificate != "" {
		data, err := r.file(field+".client-certificate", u.ClientCertificate, false)
		if err != nil {
			return err
		}
		if err := certificatesOnly(data); err != nil {
			return r.refuse(field+".client-certificate", "%s: %v", u.ClientCertificate, err)
		}
		u.ClientCertificateData, u.ClientCertificate = data, ""
	}
	if u.ClientKey != "" {
		data, err := r.file(field+".client-key", u.ClientKey, true)
		if err != nil {
			return err
		}
		u.ClientKeyData, u.ClientKey = data, ""
	}
	return nil
}

func (r embedder) cluster(name string, c *clientcmdapi.Cluster) error {
	field := "clusters[" + name + "]"
	if c.CertificateAuthority != "" {
		data, err := r.file(field+".certificate-authority", c.CertificateAuthority, false)
		if err != nil {
			return err
		}
		c.CertificateAuthorityData, c.CertificateAuthority = data, ""
	}
	if len(c.CertificateAuthorityData) > 0 {
		// What kube.cluster-info hands a joining node: certificates,
		// never another file that happened to be named here.
		if err := certificatesOnly(c.CertificateAuthorityData); err != nil {
			return r.refuse(field+".certificate-authority", "%v", err)
		}
	}
	return nil
}

// file reads a file the kubeconfig names, relative to the kubeconfig's
// directory, refusing one outside it (by "..", an absolute path or a
// symbolic link). A secret (a client key) must also be the worker's own.
func (r embedder) file(field, name string, secret bool) ([]byte, error) {
	if slices.Contains(strings.Split(filepath.ToSlash(name), "/"), "..") {
		return nil, r.refuse(field, "%q climbs out with \"..\": files a kubeconfig names must be in its own directory %s", name, r.dir)
	}
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.dir, p)
	}
	realDir, err := filepath.EvalSymlinks(r.dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %s: %w", r.path, field, err)
	}
	if rel, err := filepath.Rel(realDir, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, r.refuse(field, "%s is outside the kubeconfig's own directory %s: keep the files a kubeconfig names beside it, or embed them (*-data)", name, r.dir)
	}
	if secret {
		data, err := secretfile.Read(real)
		var me *secretfile.ModeError
		var oe *secretfile.OwnerError
		if errors.As(err, &me) || errors.As(err, &oe) {
			return nil, r.refuse(field, "%v", err)
		}
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %s: %w", r.path, field, err)
		}
		return data, nil
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %s: %w", r.path, field, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %s: %w", r.path, field, err)
	}
	if len(data) > maxFileBytes {
		return nil, r.refuse(field, "%s is over %d bytes: not a certificate", name, maxFileBytes)
	}
	return data, nil
}

// certificatesOnly says whether data is one or more PEM certificates and
// nothing else (whitespace aside).
func certificatesOnly(data []byte) error {
	rest := bytes.TrimSpace(data)
	n := 0
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return errors.New("holds something other than PEM certificates")
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a PEM %q block: only certificates belong here", b.Type)
		}
		n++
		rest = bytes.TrimSpace(rest)
	}
	if n == 0 {
		return errors.New("holds no certificate")
	}
	return nil
}

// Saveable checks a kubeconfig before kube.save-kubeconfig writes it
// where the worker loads it from: it must be what render.kubeconfig
// makes of credentials the worker's Vault issued, and nothing a run
// could use to reach beyond the cluster. Every cluster has an https
// server and certificate-authority-data (PEM certificates), and no
// certificate-authority file, proxy-url, tls-server-name or
// insecure-skip-tls-verify; every user has client-certificate-data and
// client-key-data and nothing else (no token, token file, exec plugin,
// auth-provider, basic auth, impersonation or file); every context names
// a cluster and a user it holds, and the current context is one of them.
// It returns the servers named, for the worker's credential guard to
// compare with the cluster's inventory.
func Saveable(content string) (servers []string, err error) {
	cfg, err := clientcmd.Load([]byte(content))
	if err != nil {
		return nil, &RefusedError{Field: "content", Reason: "not a kubeconfig: " + err.Error()}
	}
	refuse := func(field, format string, args ...any) error {
		return &RefusedError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if len(cfg.Clusters) == 0 || len(cfg.AuthInfos) == 0 {
		return nil, refuse("content", "a kubeconfig to save names a cluster and a user")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		c, field := cfg.Clusters[name], "clusters["+name+"]"
		u, err := url.Parse(c.Server)
		switch {
		case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
			return nil, refuse(field+".server", "%q is not the https:// URL of an API server", c.Server)
		case c.CertificateAuthority != "":
			return nil, refuse(field+".certificate-authority", "a file reference (%s): a saved kubeconfig embeds its CA (certificate-authority-data)", c.CertificateAuthority)
		case c.InsecureSkipTLSVerify:
			return nil, refuse(field+".insecure-skip-tls-verify", "a saved kubeconfig verifies the API server")
		case c.ProxyURL != "":
			return nil, refuse(field+".proxy-url", "a saved kubeconfig goes to the API server directly, not through %q", c.ProxyURL)
		case c.TLSServerName != "":
			return nil, refuse(field+".tls-server-name", "a saved kubeconfig checks the server's own name, not %q", c.TLSServerName)
		}
		if err := certificatesOnly(c.CertificateAuthorityData); err != nil {
			return nil, refuse(field+".certificate-authority-data", "%v", err)
		}
		servers = append(servers, c.Server)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		a, field := cfg.AuthInfos[name], "users["+name+"]"
		for _, bad := range []struct {
			set  bool
			what string
		}{
			{a.Exec != nil, "exec"}, {a.AuthProvider != nil, "auth-provider"}, {a.TokenFile != "", "tokenFile"},
			{a.ClientCertificate != "", "client-certificate"}, {a.ClientKey != "", "client-key"},
			{a.Token != "", "token"}, {a.Username != "" || a.Password != "", "username/password"},
			{a.Impersonate != "" || a.ImpersonateUID != "" || len(a.ImpersonateGroups) > 0 || len(a.ImpersonateUserExtra) > 0, "as (impersonation)"},
		} {
			if bad.set {
				return nil, refuse(field+"."+bad.what, "a saved kubeconfig carries only embedded client-certificate-data and client-key-data")
			}
		}
		if len(a.ClientCertificateData) == 0 || len(a.ClientKeyData) == 0 {
			return nil, refuse(field, "a saved kubeconfig carries embedded client-certificate-data and client-key-data")
		}
		if err := certificatesOnly(a.ClientCertificateData); err != nil {
			return nil, refuse(field+".client-certificate-data", "%v", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Contexts)) {
		c, field := cfg.Contexts[name], "contexts["+name+"]"
		if _, ok := cfg.Clusters[c.Cluster]; !ok {
			return nil, refuse(field+".cluster", "%q is not a cluster of this kubeconfig", c.Cluster)
		}
		if _, ok := cfg.AuthInfos[c.AuthInfo]; !ok {
			return nil, refuse(field+".user", "%q is not a user of this kubeconfig", c.AuthInfo)
		}
	}
	if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok {
		return nil, refuse("current-context", "%q is not a context of this kubeconfig", cfg.CurrentContext)
	}
	return servers, nil
}
