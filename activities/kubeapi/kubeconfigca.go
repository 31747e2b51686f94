package kubeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/temporal"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kedge.dev/kedge/actions/kube"

	"kedge.dev/kedge/actions/errtype"
)

// UpdateKubeconfig changes the kubeconfig the worker reaches the cluster
// with (kube.update-kubeconfig), as a CA rotation must before the API
// servers present new-CA certificates and before the old CA is dropped:
// every cluster's CA data becomes in.CA, and the current context's user
// gets in.Certificate and in.PrivateKey. Only a kubeconfig with embedded
// CA data and an embedded client certificate is changed; the result is
// saved the way kube.save-kubeconfig saves one (atomically, the
// worker's own file, clients built from the old one forgotten).
func (a *Activities) UpdateKubeconfig(ctx context.Context, in kube.UpdateKubeconfigInput) (kube.UpdateKubeconfigResult, error) {
	if in.Cluster.Kubeconfig == "" {
		return kube.UpdateKubeconfigResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cluster %s: the inventory names no kubernetes.kubeconfig", in.Cluster.Name), errtype.InvalidInput, nil)
	}
	if in.Restore != "" {
		return a.restoreKubeconfig(in)
	}
	if (in.Certificate == "") != (in.PrivateKey == "") {
		return kube.UpdateKubeconfigResult{}, updateRefused("give certificate and privateKey together")
	}
	if in.CA == "" && in.Certificate == "" {
		return kube.UpdateKubeconfigResult{}, updateRefused("nothing to change: give ca, or certificate and privateKey")
	}
	if in.CA != "" {
		if err := certificatesOnly([]byte(in.CA)); err != nil {
			return kube.UpdateKubeconfigResult{}, updateRefused("ca: " + err.Error())
		}
	}
	if in.Certificate != "" {
		if _, err := tls.X509KeyPair([]byte(in.Certificate), []byte(in.PrivateKey)); err != nil {
			return kube.UpdateKubeconfigResult{}, updateRefused("certificate and privateKey: " + err.Error())
		}
	}
	prev, err := os.ReadFile(in.Cluster.Kubeconfig)
	if err != nil {
		return kube.UpdateKubeconfigResult{}, fmt.Errorf("read kubeconfig: %w", err)
	}
	cfg, err := clientcmd.Load(prev)
	if err != nil {
		return kube.UpdateKubeconfigResult{}, updateRefused(fmt.Sprintf("kubeconfig %s: %v", in.Cluster.Kubeconfig, err))
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return kube.UpdateKubeconfigResult{}, updateRefused(fmt.Sprintf("kubeconfig %s: no current context with a user", in.Cluster.Kubeconfig))
	}
	user := cfg.AuthInfos[kctx.AuthInfo]
	res := kube.UpdateKubeconfigResult{Previous: string(prev), Organization: []string{}}
	if c, err := embeddedClientCert(user.ClientCertificateData); err == nil {
		res.CommonName, res.Organization = c.Subject.CommonName, append(res.Organization, c.Subject.Organization...)
	} else if in.Certificate != "" || user.ClientCertificate != "" {
		return res, updateRefused(fmt.Sprintf("kubeconfig %s: users[%s] has no embedded client certificate (client-certificate-data): %v", in.Cluster.Kubeconfig, kctx.AuthInfo, err))
	}
	if in.CA != "" {
		for name, c := range cfg.Clusters {
			if c.CertificateAuthority != "" {
				return res, updateRefused(fmt.Sprintf("kubeconfig %s: clusters[%s] names a CA file (%s): embed it first", in.Cluster.Kubeconfig, name, c.CertificateAuthority))
			}
			c.CertificateAuthorityData = []byte(strings.TrimSpace(in.CA) + "\n")
		}
	}
	if in.Certificate != "" {
		user.ClientCertificateData, user.ClientKeyData = []byte(in.Certificate), []byte(in.PrivateKey)
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return res, fmt.Errorf("write kubeconfig: %w", err)
	}
	// Only CA data and the credential change: the servers, names and
	// everything the operator set stay as they were.
	saved, err := a.writeKubeconfig(in.Cluster, string(out))
	res.Changed = saved.Changed
	return res, err
}

func updateRefused(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
}

func embeddedClientCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// restoreKubeconfig puts back a kubeconfig an update replaced, when it
// differs from the file now only in what an update changes.
func (a *Activities) restoreKubeconfig(in kube.UpdateKubeconfigInput) (kube.UpdateKubeconfigResult, error) {
	now, err := os.ReadFile(in.Cluster.Kubeconfig)
	if err != nil {
		return kube.UpdateKubeconfigResult{}, fmt.Errorf("read kubeconfig: %w", err)
	}
	cur, err := clientcmd.Load(now)
	if err != nil {
		return kube.UpdateKubeconfigResult{}, updateRefused(fmt.Sprintf("kubeconfig %s: %v", in.Cluster.Kubeconfig, err))
	}
	back, err := clientcmd.Load([]byte(in.Restore))
	if err != nil {
		return kube.UpdateKubeconfigResult{}, updateRefused("restore: not a kubeconfig: " + err.Error())
	}
	if !sameButTrust(cur, back) {
		return kube.UpdateKubeconfigResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"restore: the kubeconfig differs from %s in more than CA data and client credentials", in.Cluster.Kubeconfig), errtype.CredentialRefused, nil)
	}
	saved, err := a.writeKubeconfig(in.Cluster, in.Restore)
	return kube.UpdateKubeconfigResult{Changed: saved.Changed, Previous: string(now), Organization: []string{}}, err
}

// sameButTrust: a and b name the same servers, contexts and users, and
// differ at most in CA data and embedded client certificates and keys.
func sameButTrust(a, b *clientcmdapi.Config) bool {
	strip := func(c *clientcmdapi.Config) *clientcmdapi.Config {
		c = c.DeepCopy()
		for _, cl := range c.Clusters {
			cl.CertificateAuthorityData, cl.LocationOfOrigin = nil, ""
		}
		for _, u := range c.AuthInfos {
			u.ClientCertificateData, u.ClientKeyData, u.LocationOfOrigin = nil, nil, ""
		}
		for _, x := range c.Contexts {
			x.LocationOfOrigin = ""
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}
