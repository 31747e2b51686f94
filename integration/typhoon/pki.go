package typhoon

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Where terraform-render-bootstrap's assets land on a controller.
const (
	CACert             = PKIDir + "/ca.crt"
	CAKey              = PKIDir + "/ca.key"
	APIServerCert      = PKIDir + "/apiserver.crt"
	APIServerKey       = PKIDir + "/apiserver.key"
	ServiceAccountPub  = PKIDir + "/service-account.pub"
	ServiceAccountKey  = PKIDir + "/service-account.key"
	EtcdClientCA       = PKIDir + "/etcd-client-ca.crt"
	EtcdClientCert     = PKIDir + "/etcd-client.crt"
	EtcdClientKey      = PKIDir + "/etcd-client.key"
	ControllerManagerK = PKIDir + "/controller-manager.conf"
	SchedulerK         = PKIDir + "/scheduler.conf"
	EtcdServerCA       = EtcdPKIDir + "/server-ca.crt"
	EtcdServerCert     = EtcdPKIDir + "/server.crt"
	EtcdServerKey      = EtcdPKIDir + "/server.key"
	EtcdPeerCA         = EtcdPKIDir + "/peer-ca.crt"
	EtcdPeerCert       = EtcdPKIDir + "/peer.crt"
	EtcdPeerKey        = EtcdPKIDir + "/peer.key"
	// KubeletClientCert is where a TLS-bootstrapped kubelet keeps its
	// client certificate and key (one PEM file) and its kubeconfig points.
	KubeletClientCert = "/var/lib/kubelet/pki/kubelet-client-current.pem"
)

// EtcdUID is the etcd user Typhoon's hosts run etcd as (--user 232:232);
// /var/lib/etcd and /etc/ssl/etcd belong to it.
const EtcdUID = 232

// Cluster names a Typhoon cluster's API server and etcd members, as its
// Terraform variables do.
type Cluster struct {
	// APIServer is the API server's DNS name (k8s_domain_name).
	APIServer string
	// EtcdServers are the controllers' DNS names, in order.
	EtcdServers []string
}

// PKI is a cluster's certificate authorities and the credentials
// terraform-render-bootstrap would make from them. Every key is RSA 2048,
// as Typhoon's. Nothing of it comes from Kedge.
type PKI struct {
	c       Cluster
	ca      *x509.Certificate
	caKey   *rsa.PrivateKey
	etcdCA  *x509.Certificate
	etcdKey *rsa.PrivateKey
	saKey   *rsa.PrivateKey
	// BootstrapToken is the kubelets' bootstrap token, ID.SECRET.
	BootstrapToken string
}

// NewPKI makes a cluster CA, an etcd CA, a service-account key and a
// bootstrap token.
func NewPKI(c Cluster) (*PKI, error) {
	p := &PKI{c: c}
	var err error
	if p.ca, p.caKey, err = selfSigned("kubernetes-ca"); err != nil {
		return nil, err
	}
	if p.etcdCA, p.etcdKey, err = selfSigned("etcd-ca"); err != nil {
		return nil, err
	}
	if p.saKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	id, secret := make([]byte, 3), make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	p.BootstrapToken = hex.EncodeToString(id) + "." + hex.EncodeToString(secret)
	return p, nil
}

// CA is the cluster CA certificate, PEM.
func (p *PKI) CA() []byte { return certPEM(p.ca) }

// EtcdCA is etcd's CA certificate, PEM.
func (p *PKI) EtcdCA() []byte { return certPEM(p.etcdCA) }

// EtcdCAKey is etcd's CA key, PEM: Typhoon keeps it with the cluster's
// Terraform assets, never on a host.
func (p *PKI) EtcdCAKey() []byte { return keyPEM(p.etcdKey) }

// ServiceAccountPublicKey is the service-account public key, PEM.
func (p *PKI) ServiceAccountPublicKey() []byte {
	der, _ := x509.MarshalPKIXPublicKey(&p.saKey.PublicKey)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// APIServerNames are the API server certificate's DNS names: the
// cluster's API name and the kubernetes Service's.
func (p *PKI) APIServerNames() []string {
	return []string{p.c.APIServer, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
}

// ControllerFiles are the secrets terraform-render-bootstrap puts on every
// controller: the cluster CA and its key, the API server's certificate
// (also its kubelet client certificate), the service-account key pair,
// etcd's CA, server, peer and client certificates, and the
// controller-manager's and scheduler's kubeconfigs. Keys are 0600.
func (p *PKI) ControllerFiles() ([]File, error) {
	var files []File
	add := func(path string, mode uint32, data []byte) {
		files = append(files, File{Path: path, Mode: mode, Data: data})
	}
	add(CACert, 0o644, p.CA())
	add(CAKey, 0o600, keyPEM(p.caKey))
	apiserver, err := p.leaf(p.ca, p.caKey, "kube-apiserver", []string{"system:masters"}, p.APIServerNames(), []net.IP{net.ParseIP("10.3.0.1")}, true, true)
	if err != nil {
		return nil, err
	}
	add(APIServerCert, 0o644, apiserver.cert)
	add(APIServerKey, 0o600, apiserver.key)
	add(ServiceAccountPub, 0o644, p.ServiceAccountPublicKey())
	add(ServiceAccountKey, 0o600, keyPEM(p.saKey))

	client, err := p.leaf(p.etcdCA, p.etcdKey, "etcd-client", nil, nil, nil, false, true)
	if err != nil {
		return nil, err
	}
	add(EtcdClientCA, 0o644, p.EtcdCA())
	add(EtcdClientCert, 0o644, client.cert)
	add(EtcdClientKey, 0o600, client.key)
	// Every member's certificates name every member (Typhoon issues one
	// server and one peer certificate for the whole cluster). The peer
	// certificate also holds 127.0.0.1: the test world's hosts share one
	// network namespace, so members reach each other from the loopback
	// address, which etcd checks against the peer certificate.
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	server, err := p.leaf(p.etcdCA, p.etcdKey, "etcd-server", nil, append([]string{"localhost"}, p.c.EtcdServers...), loopback, true, true)
	if err != nil {
		return nil, err
	}
	peer, err := p.leaf(p.etcdCA, p.etcdKey, "etcd-peer", nil, p.c.EtcdServers, loopback, true, true)
	if err != nil {
		return nil, err
	}
	add(EtcdServerCA, 0o644, p.EtcdCA())
	add(EtcdServerCert, 0o644, server.cert)
	add(EtcdServerKey, 0o600, server.key)
	add(EtcdPeerCA, 0o644, p.EtcdCA())
	add(EtcdPeerCert, 0o644, peer.cert)
	add(EtcdPeerKey, 0o600, peer.key)

	for _, k := range []struct{ path, cn string }{
		{ControllerManagerK, "system:kube-controller-manager"},
		{SchedulerK, "system:kube-scheduler"},
	} {
		kc, err := p.ClientKubeconfig(k.cn, nil)
		if err != nil {
			return nil, err
		}
		add(k.path, 0o600, kc)
	}
	return files, nil
}

// BootstrapKubeconfig is /etc/kubernetes/kubeconfig: the cluster CA and
// the bootstrap token, what kubelet.path waits for.
func (p *PKI) BootstrapKubeconfig() []byte {
	return []byte(kubeconfig(p.c.APIServer, p.CA(), "kubelet-bootstrap", "    token: "+p.BootstrapToken+"\n", ""))
}

// NodeFiles are what a node's TLS bootstrap would have left: the
// kubelet's client certificate and key in one file, and its kubeconfig
// pointing at that file (as the kubelet writes it).
func (p *PKI) NodeFiles(node string) ([]File, error) {
	c, err := p.leaf(p.ca, p.caKey, "system:node:"+node, []string{"system:nodes"}, nil, nil, false, true)
	if err != nil {
		return nil, err
	}
	user := fmt.Sprintf("    client-certificate: %s\n    client-key: %s\n", KubeletClientCert, KubeletClientCert)
	return []File{
		{Path: KubeletClientCert, Mode: 0o600, Data: append(c.cert, c.key...)},
		{Path: KubeletKubeconfig, Mode: 0o600, Data: []byte(kubeconfig(p.c.APIServer, p.CA(), "default-auth", user, ""))},
	}, nil
}

// ClientKubeconfig is a kubeconfig with an embedded client certificate
// for cn (organizations orgs) of the cluster CA. With server set it talks
// to that address and checks the API server's certificate for the
// cluster's API name (tls-server-name): how a test outside the hosts'
// /etc/hosts reaches it.
func (p *PKI) ClientKubeconfig(cn string, orgs []string, server ...string) ([]byte, error) {
	c, err := p.leaf(p.ca, p.caKey, cn, orgs, nil, nil, false, true)
	if err != nil {
		return nil, err
	}
	user := fmt.Sprintf("    client-certificate-data: %s\n    client-key-data: %s\n",
		base64.StdEncoding.EncodeToString(c.cert), base64.StdEncoding.EncodeToString(c.key))
	addr, tlsName := p.c.APIServer, ""
	if len(server) > 0 {
		addr, tlsName = server[0], p.c.APIServer
	}
	return []byte(kubeconfig(addr, p.CA(), strings.TrimPrefix(cn, "system:"), user, tlsName)), nil
}

func kubeconfig(server string, ca []byte, user, auth, tlsServerName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://%s:6443\n", server)
	fmt.Fprintf(&b, "    certificate-authority-data: %s\n", base64.StdEncoding.EncodeToString(ca))
	if tlsServerName != "" {
		fmt.Fprintf(&b, "    tls-server-name: %s\n", tlsServerName)
	}
	fmt.Fprintf(&b, "users:\n- name: %s\n  user:\n%s", user, auth)
	fmt.Fprintf(&b, "contexts:\n- name: default\n  context:\n    cluster: local\n    user: %s\ncurrent-context: default\n", user)
	return b.String()
}

type pair struct{ cert, key []byte }

func (p *PKI) leaf(ca *x509.Certificate, caKey *rsa.PrivateKey, cn string, orgs, dns []string, ips []net.IP, server, client bool) (pair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return pair{}, err
	}
	return pair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: keyPEM(key)}, nil
}

func selfSigned(cn string) (*x509.Certificate, *rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
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
