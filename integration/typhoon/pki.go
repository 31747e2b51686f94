package typhoon

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"regexp"
	"strings"
	"time"

	"kedge.dev/kedge/integration/typhoon/tftemplate"
	"kedge.dev/kedge/integration/typhoon/upstream"
)

// Validity is every certificate's life in terraform-render-bootstrap, the
// CAs' included: validity_period_hours = 8760.
const Validity = 8760 * time.Hour

// Cluster is what Typhoon's Terraform variables say of a cluster.
type Cluster struct {
	// Name is cluster_name.
	Name string
	// APIServer is the API server's DNS name (k8s_domain_name).
	APIServer string
	// EtcdServers are the controllers' DNS names, in order.
	EtcdServers []string
}

// PKI is what terraform-render-bootstrap's tls-*.tf, auth.tf and
// manifests.tf make for a cluster, made the way the Terraform resources
// make it: RSA 2048 keys, the subjects, names and uses those files give,
// every certificate valid for Validity from now. Nothing of it comes from
// Kedge.
type PKI struct {
	c        Cluster
	now      time.Time
	ca       authority
	etcd     authority
	agg      authority
	saKey    *rsa.PrivateKey
	tokenID  string
	tokenSec string
}

type authority struct {
	cert *x509.Certificate
	key  *rsa.PrivateKey
}

// NewPKI makes the cluster, etcd and aggregation (front-proxy) CAs, the
// service-account key and the bootstrap token.
func NewPKI(c Cluster) (*PKI, error) {
	p := &PKI{c: c, now: time.Now()}
	var err error
	for _, a := range []struct {
		to   *authority
		cn   string
		orgs []string
	}{{&p.ca, "kubernetes-ca", []string{"typhoon"}}, {&p.etcd, "etcd-ca", []string{"etcd"}}, {&p.agg, "kubernetes-front-proxy-ca", nil}} {
		if *a.to, err = p.selfSigned(a.cn, a.orgs); err != nil {
			return nil, err
		}
	}
	if p.saKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	// random_password: length 6 and 16, no upper case, no specials.
	if p.tokenID, err = password(6); err != nil {
		return nil, err
	}
	if p.tokenSec, err = password(16); err != nil {
		return nil, err
	}
	return p, nil
}

// CA is the cluster CA certificate, PEM.
func (p *PKI) CA() []byte { return certPEM(p.ca.cert) }

// EtcdCA is etcd's CA certificate, PEM.
func (p *PKI) EtcdCA() []byte { return certPEM(p.etcd.cert) }

// AggregationCA is the front-proxy CA certificate, PEM.
func (p *PKI) AggregationCA() []byte { return certPEM(p.agg.cert) }

// EtcdCAKey is etcd's CA key, PEM. Typhoon puts it on no host and in no
// output: it lives only in the Terraform state
// (module.bootstrap.tls_private_key.etcd-ca), whence an operator takes it.
func (p *PKI) EtcdCAKey() []byte { return keyPEM(p.etcd.key) }

// AggregationCAKey is the front-proxy CA's key, PEM: like etcd's, only in
// the Terraform state.
func (p *PKI) AggregationCAKey() []byte { return keyPEM(p.agg.key) }

// Token is the kubelets' bootstrap token, ID.SECRET.
func (p *PKI) Token() string { return p.tokenID + "." + p.tokenSec }

func (p *PKI) server() string { return fmt.Sprintf("https://%s:6443", p.c.APIServer) }

// BootstrapKubeconfig is module.bootstrap.kubeconfig-kubelet, what
// ssh.tf copies to /etc/kubernetes/kubeconfig on every node.
func (p *PKI) BootstrapKubeconfig() ([]byte, error) {
	s, err := tftemplate.RenderFS(upstream.FS(), upstream.KubeconfigBootstrap, map[string]any{
		"ca_cert": base64.StdEncoding.EncodeToString(p.CA()), "server": p.server(),
		"token_id": p.tokenID, "token_secret": p.tokenSec,
	})
	return []byte(s), err
}

// Images are the images of the control plane and the default components:
// container_images' defaults in
// terraform-render-bootstrap's variables.tf.
func Images() (map[string]string, error) {
	b, err := upstream.ReadFile(upstream.Bootstrap + "/variables.tf")
	if err != nil {
		return nil, err
	}
	images := map[string]string{}
	for _, k := range []string{"kube_apiserver", "kube_controller_manager", "kube_scheduler", "coredns", "cilium_agent", "cilium_operator"} {
		m := regexp.MustCompile(`(?m)^\s*` + k + `\s*=\s*"([^"]+)"`).FindSubmatch(b)
		if m == nil {
			return nil, fmt.Errorf("typhoon: %s/variables.tf: no default image for %s", upstream.Bootstrap, k)
		}
		images[k] = string(m[1])
	}
	return images, nil
}

// Assets is module.bootstrap.assets_dist: the kubeconfigs of auth.tf, the
// TLS files of tls-k8s.tf, tls-etcd.tf and tls-aggregation.tf, the static
// manifests and the manifests, each rendered from the vendored templates
// with the variables manifests.tf gives them (Typhoon's bare-metal
// defaults: aggregation enabled, the CIDRs and issuer of its
// variables.tf).
func (p *PKI) Assets() (map[string][]byte, error) {
	a := map[string][]byte{}
	kube := func(cn string, orgs []string) (string, error) {
		c, err := p.leaf(p.ca, cn, orgs, nil, nil, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return "", err
		}
		return tftemplate.RenderFS(upstream.FS(), upstream.KubeconfigAdmin, map[string]any{
			"name": p.c.Name, "ca_cert": base64.StdEncoding.EncodeToString(p.CA()),
			"kubelet_cert": base64.StdEncoding.EncodeToString(c.cert), "kubelet_key": base64.StdEncoding.EncodeToString(c.key),
			"server": p.server(),
		})
	}
	for _, k := range []struct {
		name, cn string
		orgs     []string
	}{{"auth/admin.conf", "kubernetes-admin", []string{"system:masters"}},
		{"auth/controller-manager.conf", "system:kube-controller-manager", nil},
		{"auth/scheduler.conf", "system:kube-scheduler", nil}} {
		s, err := kube(k.cn, k.orgs)
		if err != nil {
			return nil, fmt.Errorf("typhoon: %s: %w", k.name, err)
		}
		a[k.name] = []byte(s)
	}

	apiserver, err := p.leaf(p.ca, "kube-apiserver", []string{"system:masters"},
		[]string{p.c.APIServer, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("10.3.0.1")}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&p.saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	a["tls/k8s/ca.crt"], a["tls/k8s/ca.key"] = p.CA(), keyPEM(p.ca.key)
	a["tls/k8s/apiserver.crt"], a["tls/k8s/apiserver.key"] = apiserver.cert, apiserver.key
	a["tls/k8s/service-account.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})
	a["tls/k8s/service-account.key"] = keyPEM(p.saKey)

	agg, err := p.leaf(p.agg, "kube-apiserver", nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	a["tls/k8s/aggregation-ca.crt"], a["tls/k8s/aggregation-client.crt"], a["tls/k8s/aggregation-client.key"] = p.AggregationCA(), agg.cert, agg.key

	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	names := append(append([]string{}, p.c.EtcdServers...), "localhost")
	client, err := p.leaf(p.etcd, "etcd-client", []string{"etcd"}, names, loopback, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	server, err := p.leaf(p.etcd, "etcd-server", []string{"etcd"}, names, loopback, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	// The one deviation in the PKI (see Patch): the peer certificate also
	// holds 127.0.0.1. The world's hosts share one network namespace, so
	// a member's connections to its peers come from the loopback address,
	// which etcd checks against the peer certificate.
	peer, err := p.leaf(p.etcd, "etcd-peer", []string{"etcd"}, p.c.EtcdServers, loopback, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"etcd-client-ca.crt", "server-ca.crt", "peer-ca.crt"} {
		a["tls/etcd/"+f] = p.EtcdCA()
	}
	a["tls/etcd/etcd-client.crt"], a["tls/etcd/etcd-client.key"] = client.cert, client.key
	a["tls/etcd/server.crt"], a["tls/etcd/server.key"] = server.cert, server.key
	a["tls/etcd/peer.crt"], a["tls/etcd/peer.key"] = peer.cert, peer.key

	if err := p.manifests(a); err != nil {
		return nil, err
	}
	return a, nil
}

// manifests renders static-manifests/* and manifests/* as manifests.tf
// does.
func (p *PKI) manifests(a map[string][]byte) error {
	images, err := Images()
	if err != nil {
		return err
	}
	// var.enable_aggregation (Typhoon's default, true) ?
	// indent(4, local.aggregation_flags) : ""
	flags, err := upstream.Heredoc(upstream.Bootstrap+"/manifests.tf", "aggregation_flags")
	if err != nil {
		return err
	}
	var etcd []string
	for _, s := range p.c.EtcdServers {
		etcd = append(etcd, fmt.Sprintf("https://%s:2379", s))
	}
	static := map[string]any{
		"kube_apiserver_image": images["kube_apiserver"], "kube_controller_manager_image": images["kube_controller_manager"],
		"kube_scheduler_image": images["kube_scheduler"], "etcd_servers": strings.Join(etcd, ","),
		"pod_cidr": PodCIDR, "service_cidr": ServiceCIDR, "service_account_issuer": ServiceAccountIssuer,
		"aggregation_flags": tftemplate.Indent(4, flags),
	}
	manifests := map[string]any{
		"server": p.server(), "apiserver_host": p.c.APIServer, "apiserver_port": 6443,
		"token_id": p.tokenID, "token_secret": p.tokenSec,
	}
	// The components Typhoon installs by default (var.components):
	// CoreDNS, and Cilium for var.networking "cilium" (conditional.tf;
	// kube-proxy only beside another CNI).
	coredns := map[string]any{
		"coredns_image": images["coredns"], "control_plane_replicas": max(2, len(p.c.EtcdServers)),
		"cluster_domain_suffix": "cluster.local", "cluster_dns_service_ip": ClusterDNS,
	}
	cilium := map[string]any{
		"cilium_agent_image": images["cilium_agent"], "cilium_operator_image": images["cilium_operator"],
		"pod_cidr": PodCIDR, "daemonset_tolerations": []any{},
	}
	for _, dir := range []struct {
		from, to string
		vars     map[string]any
	}{{upstream.StaticManifests, "static-manifests/", static}, {upstream.Manifests, "manifests/", manifests},
		{upstream.CoreDNS, "manifests/coredns/", coredns}, {upstream.Cilium, "manifests/network/", cilium}} {
		entries, err := fs.ReadDir(upstream.FS(), dir.from)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			s, err := tftemplate.RenderFS(upstream.FS(), dir.from+"/"+name, dir.vars)
			if err != nil {
				return err
			}
			a[dir.to+name] = []byte(s)
		}
	}
	return nil
}

// ClientKubeconfig is a kubeconfig for the test itself, with a client
// certificate for cn (organizations orgs) from the cluster CA, that talks
// to address and checks the API server's certificate for the cluster's
// API name.
func (p *PKI) ClientKubeconfig(cn string, orgs []string, address string) ([]byte, error) {
	c, err := p.leaf(p.ca, cn, orgs, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://%[2]s:6443
    tls-server-name: %[3]s
    certificate-authority-data: %[4]s
users:
- name: %[1]s
  user:
    client-certificate-data: %[5]s
    client-key-data: %[6]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s
current-context: %[1]s
`, p.c.Name, address, p.c.APIServer, base64.StdEncoding.EncodeToString(p.CA()),
		base64.StdEncoding.EncodeToString(c.cert), base64.StdEncoding.EncodeToString(c.key)), nil
}

type pair struct{ cert, key []byte }

// leaf is tls_locally_signed_cert of a tls_cert_request: key_encipherment
// and digital_signature, and the extended uses given.
func (p *PKI) leaf(ca authority, cn string, orgs, dns []string, ips []net.IP, uses ...x509.ExtKeyUsage) (pair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    p.now,
		NotAfter:     p.now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  uses,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return pair{}, err
	}
	return pair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: keyPEM(key)}, nil
}

// selfSigned is tls_self_signed_cert with is_ca_certificate: cert_signing,
// key_encipherment and digital_signature.
func (p *PKI) selfSigned(cn string, orgs []string) (authority, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return authority{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:             p.now,
		NotAfter:              p.now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return authority{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return authority{cert: cert, key: key}, err
}

// password is random_password with upper = false, special = false.
func password(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}
