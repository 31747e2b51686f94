package nodefiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kedge.dev/kedge/actions/render"
)

func validateKubeconfig(in render.KubeconfigInput) error {
	var p problems
	checkName(&p, "clusterName", in.ClusterName)
	checkName(&p, "user", in.User)
	checkServerURL(&p, "server", in.Server)
	checkCAPEM(&p, "caCert", in.CACert)
	hasCert := in.ClientCert != "" || in.ClientKey != ""
	switch {
	case in.Token == "" && !hasCert:
		p.add("token", "a token or a client certificate (clientCert, clientKey) is required")
	case in.Token != "" && hasCert:
		p.add("token", "give a token or a client certificate, not both")
	case in.Token != "":
		checkName(&p, "token", in.Token)
	case in.ClientCert == "":
		p.add("clientCert", "is required with clientKey")
	case in.ClientKey == "":
		p.add("clientKey", "is required with clientCert")
	default:
		if _, err := tls.X509KeyPair([]byte(in.ClientCert), []byte(in.ClientKey)); err != nil {
			p.add("clientCert", "is not a PEM certificate matching clientKey: %s", err.Error())
		}
	}
	return p.err()
}

// checkServerURL reports a value that is not an https URL of a host.
func checkServerURL(p *problems, field, s string) {
	u, err := url.Parse(s)
	switch {
	case s == "":
		p.add(field, "is required")
	case err != nil || u.Host == "" || u.Hostname() == "":
		p.add(field, "%q is not a URL of a host", s)
	case u.Scheme != "https":
		p.add(field, "%q is not an https URL", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		p.add(field, "%q holds a user, query or fragment", s)
	}
}

// checkCAPEM reports a value that is not one or more PEM certificates and
// nothing else.
func checkCAPEM(p *problems, field, s string) {
	if strings.TrimSpace(s) == "" {
		p.add(field, "is required")
		return
	}
	rest := []byte(s)
	for n := 0; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if n == 0 || strings.TrimSpace(string(rest)) != "" {
				p.add(field, "is not PEM certificates")
			}
			return
		}
		if block.Type != "CERTIFICATE" {
			p.add(field, "PEM block %d is a %s, not a CERTIFICATE", n+1, block.Type)
			return
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			p.add(field, "PEM block %d is not a certificate: %s", n+1, err.Error())
			return
		}
	}
}

// Kubeconfig renders a kubeconfig whose current context is its only
// context, with the CA and any client certificate and key embedded, so the
// one file is all a host needs.
func Kubeconfig(in render.KubeconfigInput) ([]byte, error) {
	if err := validateKubeconfig(in); err != nil {
		return nil, err
	}
	context := in.User + "@" + in.ClusterName
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[in.ClusterName] = &clientcmdapi.Cluster{
		Server:                   in.Server,
		CertificateAuthorityData: []byte(in.CACert),
	}
	user := &clientcmdapi.AuthInfo{Token: in.Token}
	if in.Token == "" {
		user.ClientCertificateData = []byte(in.ClientCert)
		user.ClientKeyData = []byte(in.ClientKey)
	}
	cfg.AuthInfos[in.User] = user
	cfg.Contexts[context] = &clientcmdapi.Context{Cluster: in.ClusterName, AuthInfo: in.User}
	cfg.CurrentContext = context
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	return append([]byte(header), out...), nil
}
