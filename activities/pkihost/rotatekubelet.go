package pkihost

import (
	"context"
	"fmt"
	"path"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/vault"
)

// kubeletClient installs the kubelet's new client certificate where its
// kubeconfig says it is: the file TLS bootstrap made (or any other), or
// embedded in the kubeconfig (Kedge's controllers), and then in the
// kubelet's certificate store too if it has one. dir is the directory of
// the file the kubeconfig names, "" for an embedded credential.
func (r *rotation) kubeletClient(ctx context.Context) (dir string, err error) {
	kc := r.in.KubeletClient
	if kc.Certificate == "" || kc.PrivateKey == "" {
		return "", invalid("kubeletClient: the reissue stage installs the kubelet's new client certificate and key (kube.kubelet-client-cert)")
	}
	leaf, err := firstCert([]byte(kc.Certificate))
	if err != nil {
		return "", invalid("kubeletClient.certificate: " + err.Error())
	}
	if leaf.CheckSignatureFrom(r.cluster().new) != nil {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("the kubelet's new client certificate is signed by %q, not the new cluster CA", leaf.Issuer.CommonName), errtype.ForeignIssuer, nil)
	}
	p := r.in.Files[layout.FileKubeletKubecfg]
	if p == "" {
		return "", invalid(fmt.Sprintf("files: the layout names no kubelet kubeconfig on %s", r.in.Target.Node))
	}
	cur, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: p})
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(r.files, func(f host.BundleFile) bool { return f.Path == p })
	if i >= 0 { // its CA data changed in this step already
		cur.Content = r.files[i].Content
	}
	certFile, keyFile, err := kubeconfigCredential([]byte(cur.Content))
	if err != nil {
		return "", invalid(fmt.Sprintf("%s on %s: %v", p, r.in.Target.Node, err))
	}
	if certFile == "" {
		r.res.Reissued = append(r.res.Reissued, p)
		doc, err := setEmbedded([]byte(cur.Content), kc.Certificate, kc.PrivateKey)
		if err != nil {
			return "", invalid(fmt.Sprintf("%s on %s: %v", p, r.in.Target.Node, err))
		}
		if i >= 0 {
			r.files[i].Content = string(doc)
		} else {
			r.add(host.BundleFile{Path: p, Content: string(doc), Mode: cur.Mode}, "kubelet")
		}
		// A kubelet that rotates its certificates copied the embedded
		// one to its store at its first start, and presents the store's.
		store := r.in.Files[layout.FileKubeletClientCurrent]
		if store == "" {
			return "", nil
		}
		st, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: store, Missing: "empty"})
		if err != nil || !st.Exists {
			return "", err
		}
		return "", r.storeClient(ctx, store, store)
	}
	return path.Dir(certFile), r.storeClient(ctx, certFile, keyFile)
}

// storeClient writes the kubelet's new client certificate and key to the
// files its kubeconfig or its store names. The kubelet's certificate
// store keeps kubelet-client-current.pem a link to a dated file and
// refuses a file in its place: it writes where the link points.
func (r *rotation) storeClient(ctx context.Context, certFile, keyFile string) error {
	kc := r.in.KubeletClient
	var err error
	if certFile, err = r.a.Hosts.RealPath(ctx, r.in.Target, certFile); err != nil {
		return err
	}
	if keyFile, err = r.a.Hosts.RealPath(ctx, r.in.Target, keyFile); err != nil {
		return err
	}
	c := credential{cert: certFile, key: keyFile, reader: "kubelet"}
	file, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: certFile})
	if err != nil {
		return err
	}
	var key host.FileStat
	if keyFile != certFile {
		if key, err = r.a.Hosts.Stat(ctx, r.in.Target, keyFile); err != nil {
			return err
		}
	}
	files, err := c.replace(file, key, r.in.Kind, kc.Certificate, kc.PrivateKey)
	if err != nil {
		return invalid(fmt.Sprintf("%s on %s: %v", certFile, r.in.Target.Node, err))
	}
	r.res.Reissued = append(r.res.Reissued, certFile)
	for _, f := range files {
		r.add(f, "kubelet")
	}
	return nil
}

// kubeletServing issues anew, from the new CA, the kubelet's serving
// certificate where it keeps it (the layout's, else kubelet.crt and .key
// beside its client certificate, in clientDir) when the old CA signed it
// (Kedge's cert-renewal puts one there); a self-signed one (Typhoon's)
// stays. A kubelet whose client certificate is in its kubeconfig (Kedge's
// controllers) has one too.
func (r *rotation) kubeletServing(ctx context.Context, clientDir string) error {
	certPath, keyPath := r.in.Files[layout.FileKubeletServingCert], r.in.Files[layout.FileKubeletServingKey]
	if certPath == "" || keyPath == "" {
		if clientDir == "" {
			return nil
		}
		certPath, keyPath = path.Join(clientDir, "kubelet.crt"), path.Join(clientDir, "kubelet.key")
	}
	cur, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: certPath, Missing: "empty"})
	if err != nil || !cur.Exists {
		return err
	}
	ca := r.cluster()
	leaf, err := firstCert([]byte(cur.Content))
	if err != nil || leaf.CheckSignatureFrom(ca.old) != nil {
		return nil
	}
	if ca.in.Issuer == "" {
		return invalid("clusterCA.issuer: the kubelet's serving certificate on " + r.in.Target.Node + " is the old CA's and must be issued anew")
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	ttl := r.in.TTL
	if ttl == "" {
		ttl = "8760h"
	}
	issued, err := r.a.Vault.IssueCert(ctx, vault.IssueCertInput{Vault: r.in.Vault, CommonName: leaf.Subject.CommonName,
		Organization: leaf.Subject.Organization, AltNames: leaf.DNSNames, IPSANs: ips, Issuer: ca.in.Issuer, Verbatim: true,
		TTL: ttl, NotAfter: ca.new.NotAfter.UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	key, err := r.a.Hosts.Stat(ctx, r.in.Target, keyPath)
	if err != nil {
		return err
	}
	files, err := credential{cert: certPath, key: keyPath}.replace(cur, key, r.in.Kind, issued.Certificate, issued.PrivateKey)
	if err != nil {
		return err
	}
	for _, f := range files {
		r.add(f, "kubelet")
	}
	r.res.Reissued = append(r.res.Reissued, certPath)
	return nil
}
