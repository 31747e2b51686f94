package pkihost

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/target"
)

// credential is one certificate on the host and where its key lives:
// a certificate and key file (the same file when they share one), or a
// kubeconfig with both embedded.
type credential struct {
	cert, key  string
	kubeconfig string // set when embedded in this kubeconfig
	etcd       bool   // used by etcd itself
	// aggregation is the API server's front-proxy client certificate.
	aggregation bool
	// noRestart: no process holds it (admin.conf): nothing restarts.
	noRestart bool
	addDNS    string
	reader    string // the component that reads it (layout.RunAs's key)
}

// RenewInPlace renews a controller's certificates where its layout keeps
// them (pki.renew-in-place): the API server's serving and kubelet client
// certificates, its etcd client certificate, etcd's server and peer
// certificates, its front-proxy client certificate, and the
// controller-manager's, scheduler's and admin's kubeconfig credentials
// (embedded, or the files they reference). Each due
// certificate is re-issued by the CA that issued it — the cluster's or
// etcd's, whichever its signature verifies with; any other issuer is
// refused (ForeignIssuer) — with the same subject and SANs (plus APIServer
// on the API server's serving certificate) and a new key, never ending
// after that CA; a CA that ends within the threshold itself is refused
// (CAWithinRenewalWindow) before anything is installed: it must be rotated
// first. Every file keeps the mode, owner and group it had (a key file
// that was missing gets the layout's documented ones). All files are
// installed as one bundle, all or none; keys never leave the worker but
// to the host. Readers lists each installed file with the component that
// reads it and who that runs as, for host.check-readable.
func (a *Activities) RenewInPlace(ctx context.Context, in pki.RenewInput) (pki.RenewResult, error) {
	threshold, err := duration(in.Threshold, 720*time.Hour)
	if err != nil {
		return pki.RenewResult{}, err
	}
	if _, err := duration(in.TTL, 8760*time.Hour); err != nil {
		return pki.RenewResult{}, err
	}
	ttl := in.TTL
	if ttl == "" {
		ttl = "8760h"
	}
	ca, err := firstCert([]byte(in.CACert))
	if err != nil {
		return pki.RenewResult{}, invalid("caCert: " + err.Error())
	}
	etcdCA, err := firstCert([]byte(in.EtcdCACert))
	if err != nil {
		return pki.RenewResult{}, invalid("etcdCACert: " + err.Error())
	}
	var aggCA *x509.Certificate
	if strings.TrimSpace(in.AggregationCACert) != "" {
		if aggCA, err = firstCert([]byte(in.AggregationCACert)); err != nil {
			return pki.RenewResult{}, invalid("aggregationCACert: " + err.Error())
		}
	}
	creds, err := a.credentials(ctx, in)
	if err != nil {
		return pki.RenewResult{}, err
	}
	if len(creds) == 0 {
		return pki.RenewResult{}, invalid(fmt.Sprintf("files: the layout names no certificate on %s (is it a controller?)", in.Target.Node))
	}

	var res pki.RenewResult
	var bundle []host.BundleFile
	readers := map[string]string{} // installed file: its reader
	now := time.Now()
	for _, c := range creds {
		cur, file, err := a.current(ctx, in.Target, c)
		if err != nil {
			return res, err
		}
		dns := slices.Clone(cur.DNSNames)
		missing := c.addDNS != "" && !slices.Contains(dns, c.addDNS)
		if missing {
			dns = append(dns, c.addDNS)
		}
		due := in.Force || missing || cur.NotAfter.Before(now.Add(threshold))
		issuer, caCert, caName := in.Issuer, ca, "the cluster CA"
		switch {
		case cur.CheckSignatureFrom(ca) == nil:
		case cur.CheckSignatureFrom(etcdCA) == nil:
			issuer, caCert, caName = in.EtcdIssuer, etcdCA, "etcd's CA"
		case aggCA != nil && cur.CheckSignatureFrom(aggCA) == nil:
			issuer, caCert, caName = in.AggregationIssuer, aggCA, "the front-proxy (aggregation) CA"
		case c.aggregation && !due:
			continue // not due: which CA would renew it does not matter yet
		case c.aggregation:
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s on %s (%q) is issued by %q, the front-proxy (aggregation) CA, which Vault does not keep: adopt it first (adopt --set-file aggregationCAKey=FILE)",
				c.cert, in.Target.Node, cur.Subject.CommonName, cur.Issuer.CommonName), errtype.ForeignIssuer, nil)
		default:
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s on %s (%q) is issued by %q, neither the cluster's CA nor etcd's that Vault keeps",
				c.cert, in.Target.Node, cur.Subject.CommonName, cur.Issuer.CommonName), errtype.ForeignIssuer, nil)
		}
		if !due {
			continue
		}
		res.Due = true
		if err := CAWithinWindow(caName, caCert, now, threshold, in.Target.Node); err != nil {
			return res, err
		}
		var ips []string
		for _, ip := range cur.IPAddresses {
			ips = append(ips, ip.String())
		}
		issued, err := a.Vault.IssueCert(ctx, vault.IssueCertInput{Vault: in.Vault, CommonName: cur.Subject.CommonName,
			Organization: cur.Subject.Organization, AltNames: dns, IPSANs: ips, Issuer: issuer, Verbatim: true,
			TTL: ttl, NotAfter: caCert.NotAfter.UTC().Format(time.RFC3339)})
		if err != nil {
			return res, err
		}
		leaf, err := firstCert([]byte(issued.Certificate))
		if err != nil || leaf.CheckSignatureFrom(caCert) != nil {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("Vault issuer %s did not sign %s with %q", issuer, c.cert, caCert.Subject.CommonName), errtype.ForeignIssuer, nil)
		}
		var key host.FileStat
		if c.kubeconfig == "" && c.key != c.cert {
			if key, err = a.Hosts.Stat(ctx, in.Target, c.key); err != nil {
				return res, err
			}
		}
		files, err := c.replace(file, key, in.Kind, issued.Certificate, issued.PrivateKey)
		if err != nil {
			return res, invalid(fmt.Sprintf("%s on %s: %v", c.kubeconfig, in.Target.Node, err))
		}
		bundle = append(bundle, files...)
		for _, f := range files {
			readers[f.Path] = c.reader
		}
		res.Renewed = append(res.Renewed, c.cert)
		switch {
		case c.etcd:
			res.Etcd = true
		case !c.noRestart:
			res.ControlPlane = true
		}
	}
	if len(bundle) == 0 {
		return res, nil
	}
	installed, err := a.Hosts.InstallBundle(ctx, host.InstallBundleInput{Target: in.Target, Files: bundle})
	res.Changed, res.Files, res.Backup, res.Created = installed.Changed, installed.Files, installed.Backup, installed.Created
	for _, f := range bundle {
		res.Readers = append(res.Readers, fileReader(f.Path, readers[f.Path], in.RunAs))
	}
	return res, err
}

// fileReader is p read by component, as the layout says it runs (root
// when it does not say).
func fileReader(p, component string, runAs map[string]layout.RunAs) host.FileReader {
	r, ok := runAs[component]
	if !ok {
		r = layout.Root("not given: root")
	}
	return host.FileReader{Path: p, Reader: component, User: r.User, Group: r.Group, Groups: r.Groups, From: r.From}
}

// credentials lists the certificates the layout names, each once.
func (a *Activities) credentials(ctx context.Context, in pki.RenewInput) ([]credential, error) {
	f := in.Files
	var out []credential
	seen := map[string]bool{}
	add := func(c credential) {
		if c.cert == "" || seen[c.cert] {
			return
		}
		seen[c.cert] = true
		out = append(out, c)
	}
	const apiserver = "kube-apiserver"
	add(credential{cert: f[layout.FileAPIServerCert], key: f[layout.FileAPIServerKey], addDNS: in.APIServer, reader: apiserver})
	add(credential{cert: f[layout.FileAPIServerKubeletCert], key: f[layout.FileAPIServerKubeletKey], reader: apiserver})
	add(credential{cert: f[layout.FileEtcdClientCert], key: f[layout.FileEtcdClientKey], reader: apiserver})
	add(credential{cert: f[layout.FileEtcdServerCert], key: f[layout.FileEtcdServerKey], etcd: true, reader: "etcd"})
	add(credential{cert: f[layout.FileEtcdPeerCert], key: f[layout.FileEtcdPeerKey], etcd: true, reader: "etcd"})
	add(credential{cert: f[layout.FileAggregationCert], key: f[layout.FileAggregationKey], aggregation: true, reader: apiserver})
	for _, kc := range []struct{ path, reader string }{
		{f[layout.FileControllerManagerKC], "kube-controller-manager"}, {f[layout.FileSchedulerKC], "kube-scheduler"},
		// Read by an operator's kubectl (Typhoon's bootstrap.service) as
		// root; nothing restarts for it.
		{f[layout.FileAdminKC], "kubectl"},
	} {
		k := kc.path
		if k == "" || seen[k] {
			continue
		}
		r, err := a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: in.Target, Path: k})
		if err != nil {
			return nil, err
		}
		cert, key, err := kubeconfigCredential([]byte(r.Content))
		if err != nil {
			return nil, invalid(fmt.Sprintf("%s on %s: %v", k, in.Target.Node, err))
		}
		noRestart := kc.reader == "kubectl"
		if cert == "" { // embedded
			seen[k] = true
			out = append(out, credential{cert: k, kubeconfig: k, reader: kc.reader, noRestart: noRestart})
			continue
		}
		add(credential{cert: cert, key: key, reader: kc.reader, noRestart: noRestart})
	}
	for _, c := range out {
		if c.kubeconfig == "" && c.key == "" {
			return nil, invalid(fmt.Sprintf("%s on %s: the layout names no key for it", c.cert, in.Target.Node))
		}
	}
	return out, nil
}

// current reads the credential's certificate and, for files, the mode to
// keep.
func (a *Activities) current(ctx context.Context, t target.SSH, c credential) (*x509.Certificate, host.ReadFileResult, error) {
	r, err := a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: t, Path: c.cert})
	if err != nil {
		return nil, r, err
	}
	var cert *x509.Certificate
	if c.kubeconfig != "" {
		cert, err = embeddedCert([]byte(r.Content))
	} else {
		cert, err = firstCert([]byte(r.Content))
	}
	if err != nil {
		return nil, r, invalid(fmt.Sprintf("%s on %s: %v", c.cert, t.Node, err))
	}
	return cert, r, nil
}

// replace is what to install for the new certificate and key: each file
// with the mode it has (its owner and group stay: host.install-bundle
// keeps them), a key file that was missing with the layout's documented
// mode and owner.
func (c credential) replace(cur host.ReadFileResult, key host.FileStat, kind, certPEM, keyPEM string) ([]host.BundleFile, error) {
	if c.kubeconfig != "" {
		doc, err := setEmbedded([]byte(cur.Content), certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		return []host.BundleFile{{Path: c.kubeconfig, Content: string(doc), Mode: cur.Mode}}, nil
	}
	if c.key == c.cert {
		return []host.BundleFile{{Path: c.cert, Content: certPEM + keyPEM, Mode: cur.Mode}}, nil
	}
	kf := host.BundleFile{Path: c.key, Content: keyPEM, Mode: key.Mode}
	if !key.Exists {
		kf.Mode, kf.Owner = layout.Documented(kind, c.key, true)
	}
	return []host.BundleFile{{Path: c.cert, Content: certPEM, Mode: cur.Mode}, kf}, nil
}

// kubeconfigUser is the first user's credential fields.
type kubeconfigUser struct {
	Users []struct {
		User struct {
			CertData string `yaml:"client-certificate-data"`
			KeyData  string `yaml:"client-key-data"`
			Cert     string `yaml:"client-certificate"`
			Key      string `yaml:"client-key"`
		} `yaml:"user"`
	} `yaml:"users"`
}

// kubeconfigCredential is the certificate and key files a kubeconfig's
// user references; both empty when they are embedded.
func kubeconfigCredential(doc []byte) (cert, key string, err error) {
	var kc kubeconfigUser
	if err := yaml.Unmarshal(doc, &kc); err != nil {
		return "", "", err
	}
	if len(kc.Users) != 1 {
		return "", "", fmt.Errorf("want one user, found %d", len(kc.Users))
	}
	u := kc.Users[0].User
	switch {
	case u.CertData != "" && u.KeyData != "":
		return "", "", nil
	case u.Cert != "" && u.Key != "":
		return u.Cert, u.Key, nil
	}
	return "", "", fmt.Errorf("the user has no client certificate and key")
}

func embeddedCert(doc []byte) (*x509.Certificate, error) {
	var kc kubeconfigUser
	if err := yaml.Unmarshal(doc, &kc); err != nil {
		return nil, err
	}
	if len(kc.Users) != 1 {
		return nil, fmt.Errorf("want one user, found %d", len(kc.Users))
	}
	data, err := base64.StdEncoding.DecodeString(kc.Users[0].User.CertData)
	if err != nil {
		return nil, fmt.Errorf("client-certificate-data: %w", err)
	}
	return firstCert(data)
}

// setEmbedded replaces the user's embedded certificate and key, leaving
// the rest of the kubeconfig as it is.
func setEmbedded(doc []byte, certPEM, keyPEM string) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if len(root.Content) != 1 {
		return nil, fmt.Errorf("not a kubeconfig")
	}
	users := lookup(root.Content[0], "users")
	if users == nil || users.Kind != yaml.SequenceNode || len(users.Content) != 1 {
		return nil, fmt.Errorf("want one user")
	}
	user := lookup(users.Content[0], "user")
	if user == nil {
		return nil, fmt.Errorf("the user has no credentials")
	}
	for key, val := range map[string]string{"client-certificate-data": certPEM, "client-key-data": keyPEM} {
		v := lookup(user, key)
		if v == nil {
			return nil, fmt.Errorf("the user has no %s", key)
		}
		v.Value, v.Style = base64.StdEncoding.EncodeToString([]byte(val)), 0
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, invalid(fmt.Sprintf("%q is not a positive duration", s))
	}
	return d, nil
}
