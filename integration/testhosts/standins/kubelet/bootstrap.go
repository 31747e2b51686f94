package main

import (
	"context"
	"crypto"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// The client certificate's files in CERT-DIR, named as the real kubelet
// names them: the store writes kubelet-client-DATE.pem (certificate and
// key, 0600) and points kubelet-client-current.pem at it; the key waits in
// kubelet-client.key.tmp until its certificate is issued, so a retried
// bootstrap asks again for the same key (and finds its own CSR).
const (
	clientPairPrefix = "kubelet-client"
	pendingKeyFile   = "kubelet-client.key.tmp"
)

// connect returns a client of the API server for the node, bootstrapping
// its credentials first when needed. It retries until it succeeds or ctx
// ends (then it returns nil): the API server may be a static pod of this
// very kubelet, not up yet.
func connect(ctx context.Context, o options, logger *log.Logger) kubernetes.Interface {
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		cs, err := nodeClient(ctx, o, logger)
		if err == nil {
			return cs
		}
		logger.Printf("API server credentials: %v; retrying in %s", err, delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// nodeClient builds the node's client from --kubeconfig, after a TLS
// bootstrap when --bootstrap-kubeconfig is given and the kubeconfig is
// missing or its client certificate expired (the real kubelet's
// LoadClientCert).
func nodeClient(ctx context.Context, o options, logger *log.Logger) (kubernetes.Interface, error) {
	if o.bootstrapKubeconfig != "" {
		valid, why := kubeconfigStillValid(o.kubeconfig)
		if valid {
			logger.Printf("using kubeconfig %s", o.kubeconfig)
		} else {
			logger.Printf("kubeconfig %s: %s; TLS bootstrap with %s", o.kubeconfig, why, o.bootstrapKubeconfig)
			if err := bootstrap(ctx, o, logger); err != nil {
				return nil, fmt.Errorf("TLS bootstrap: %w", err)
			}
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubelet-sim/" + o.version
	return kubernetes.NewForConfig(cfg)
}

// kubeconfigStillValid says whether the kubeconfig at path exists and
// holds client certificates none of which has expired; if not, why.
func kubeconfigStillValid(path string) (bool, string) {
	if _, err := os.Stat(path); err != nil {
		return false, "missing"
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return false, fmt.Sprintf("unreadable (%v)", err)
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return false, fmt.Sprintf("unusable (%v)", err)
	}
	// Has the side effect of loading the certificate files into CertData.
	if _, err := transport.TLSConfigFor(tc); err != nil {
		return false, fmt.Sprintf("unusable (%v)", err)
	}
	certs, err := certutil.ParseCertsPEM(tc.TLS.CertData)
	if err != nil || len(certs) == 0 {
		return false, "holds no client certificate"
	}
	now := time.Now()
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return false, fmt.Sprintf("client certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return true, ""
}

// bootstrap asks for the node's client certificate with the bootstrap
// kubeconfig's token, stores it in the cert dir and writes --kubeconfig.
func bootstrap(ctx context.Context, o options, logger *log.Logger) error {
	bootCfg, err := clientcmd.BuildConfigFromFlags("", o.bootstrapKubeconfig)
	if err != nil {
		return err
	}
	bootCfg.UserAgent = "kubelet-sim/" + o.version
	client, err := kubernetes.NewForConfig(bootCfg)
	if err != nil {
		return err
	}
	store, err := certificate.NewFileStore(clientPairPrefix, o.certDir, o.certDir, "", "")
	if err != nil {
		return fmt.Errorf("certificate store %s: %w", o.certDir, err)
	}
	pending := filepath.Join(o.certDir, pendingKeyFile)
	if err := os.MkdirAll(o.certDir, 0o755); err != nil {
		return err
	}
	keyPEM, generated, err := keyutil.LoadOrGenerateKeyFile(pending)
	if err != nil {
		return fmt.Errorf("private key: %w", err)
	}
	if generated {
		logger.Printf("generated a new ECDSA P-256 key (%s until its certificate is issued)", pending)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return fmt.Errorf("private key %s: %w", pending, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return errors.New("private key cannot sign")
	}
	subject := &pkix.Name{CommonName: "system:node:" + o.nodeName, Organization: []string{"system:nodes"}}
	csrPEM, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return fmt.Errorf("make CSR: %w", err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	name, err := csrName(signer.Public(), subject, usages)
	if err != nil {
		return err
	}
	reqCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	reqName, uid, err := csr.RequestCertificateWithContext(reqCtx, client, csrPEM, name,
		certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return err
	}
	logger.Printf("requested a client certificate for %s: CertificateSigningRequest %s (signer %s); waiting for it to be approved and issued",
		subject.CommonName, reqName, certificatesv1.KubeAPIServerClientKubeletSignerName)
	certPEM, err := csr.WaitForCertificate(reqCtx, client, reqName, uid)
	if err != nil {
		return fmt.Errorf("wait for CSR %s: %w", reqName, err)
	}
	pair, err := store.Update(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("store the client certificate: %w", err)
	}
	_ = os.Remove(pending)
	logger.Printf("CSR %s issued: %s, valid until %s, stored in %s", reqName, pair.Leaf.Subject.CommonName,
		pair.Leaf.NotAfter.UTC().Format(time.RFC3339), store.CurrentPath())
	if err := writeNodeKubeconfig(bootCfg, o.kubeconfig, store.CurrentPath()); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", o.kubeconfig, err)
	}
	logger.Printf("wrote kubeconfig %s (server %s, client certificate %s)", o.kubeconfig, bootCfg.Host, store.CurrentPath())
	return nil
}

// writeNodeKubeconfig writes the kubeconfig the real kubelet writes after
// TLS bootstrap: the bootstrap kubeconfig's server and CA, and the pair
// file as client certificate and key.
func writeNodeKubeconfig(boot *rest.Config, path, pemPath string) error {
	cluster := &clientcmdapi.Cluster{Server: boot.Host, InsecureSkipTLSVerify: boot.Insecure}
	if boot.CAFile != "" {
		cluster.CertificateAuthority = boot.CAFile
	} else {
		cluster.CertificateAuthorityData = boot.CAData
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(cfg, path)
}

// csrName is the real kubelet's name for its CSR: a digest of what it asks
// for, so that a retry with the same key finds the request it made.
func csrName(pub crypto.PublicKey, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	h := sha512.New512_256()
	encode := base64.RawURLEncoding.EncodeToString
	write := func(b []byte) { h.Write([]byte(encode(b))); h.Write([]byte{'|'}) }
	write(der)
	write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + encode(h.Sum(nil)), nil
}
