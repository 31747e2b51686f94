package pkihost

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/errtype"
)

// The signer's own files, beside the file it shared with a trust point:
// the CSR signer takes one certificate, so a bundle can never be its file.
const (
	signerCert = "ca-signer.crt"
	signerKey  = "ca-signer.key"
	// signerWas marks a controller-manager flag the rotation changed,
	// with the value it had, as a YAML comment on the flag's line.
	signerWas = " # kedge ca-rotation: was "
)

const (
	flagSignerCert = "--cluster-signing-cert-file="
	flagSignerKey  = "--cluster-signing-key-file="
)

// rotated is one CA being replaced, parsed.
type rotated struct {
	kind     string // layout.CACluster, CAEtcd, CAFrontProxy
	old, new *x509.Certificate
	in       pki.CARotation
}

// rotation is the plan of one host's step: the files to write and who
// reads them.
type rotation struct {
	a       *Activities
	in      pki.RotateCAInput
	cas     []rotated
	files   []host.BundleFile
	readers map[string]string // path: the component that reads it
	restart map[string]bool
	res     pki.RotateCAResult
}

// RotateCA moves one host a stage of a CA rotation further
// (pki.rotate-ca): the trust points of every CA being replaced hold the
// old and the new CA (trust), then every certificate the old CA signed is
// issued anew by the new one and the controller manager signs with it
// (reissue), then the trust points hold the new CA alone (drop). The
// service-account key follows the same stages: both public keys verify,
// then the new key signs, then the old public key goes. Where the
// controller manager's CSR signer shares its certificate file with a
// trust point (Typhoon's and Kedge's ca.crt), the trust stage first gives
// the signer files of its own (ca-signer.crt and .key beside it: the
// signer refuses a file of two certificates) and the drop stage puts it
// back. Files already as the stage wants them are not written, so a step
// run again changes nothing; what is written is one bundle, all or none,
// each file keeping its mode and owner.
func (a *Activities) RotateCA(ctx context.Context, in pki.RotateCAInput) (pki.RotateCAResult, error) {
	r, err := newRotation(a, in)
	if err != nil {
		return pki.RotateCAResult{}, err
	}
	// An attempt after one whose worker was lost finishes that one's
	// install, from the plan it made (the layout given is from before
	// it), or returns its result (rotatejournal.go).
	j, rec, err := a.openJournal(ctx, in)
	switch {
	case err != nil:
		return pki.RotateCAResult{}, err
	case rec != nil && rec.Done:
		return rec.Result, nil
	case rec != nil:
		return j.install(ctx, rec)
	}
	if err := r.plan(ctx); err != nil {
		return r.res, err
	}
	if len(r.files) == 0 {
		return r.res, nil
	}
	for _, f := range r.files {
		r.res.Readers = append(r.res.Readers, fileReader(f.Path, r.readers[f.Path], in.RunAs))
	}
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if r.restart[c] {
			r.res.Restart = append(r.res.Restart, c)
		}
	}
	if j != nil {
		rec, err := j.begin(ctx, r)
		if err != nil {
			return r.res, err
		}
		if rec != nil {
			return j.install(ctx, rec)
		}
	}
	// Outside a run, or nothing to change: installed at once.
	installed, err := a.Hosts.InstallBundle(ctx, host.InstallBundleInput{Target: in.Target, Files: r.files})
	r.res.Changed, r.res.Files, r.res.Backup, r.res.Created = installed.Changed, installed.Files, installed.Backup, installed.Created
	return r.res, err
}

func newRotation(a *Activities, in pki.RotateCAInput) (*rotation, error) {
	switch in.Stage {
	case pki.StageTrust, pki.StageReissue, pki.StageDrop:
	default:
		return nil, invalid(fmt.Sprintf("stage %q: want trust, reissue or drop", in.Stage))
	}
	if in.Scope != pki.ScopeControlPlane && in.Scope != pki.ScopeKubelet {
		return nil, invalid(fmt.Sprintf("scope %q: want control-plane or kubelet", in.Scope))
	}
	if _, err := duration(in.TTL, 8760*time.Hour); err != nil {
		return nil, err
	}
	r := &rotation{a: a, in: in, readers: map[string]string{}, restart: map[string]bool{}, res: pki.RotateCAResult{Restart: []string{}, Reissued: []string{}}}
	for _, c := range []struct {
		kind string
		in   pki.CARotation
	}{{layout.CACluster, in.ClusterCA}, {layout.CAEtcd, in.EtcdCA}, {layout.CAFrontProxy, in.FrontProxyCA}} {
		if c.in.Old == "" && c.in.New == "" {
			continue
		}
		old, err := firstCert([]byte(c.in.Old))
		if err != nil {
			return nil, invalid(fmt.Sprintf("%s.old: %v", c.kind, err))
		}
		nw, err := firstCert([]byte(c.in.New))
		if err != nil {
			return nil, invalid(fmt.Sprintf("%s.new: %v", c.kind, err))
		}
		if old.Equal(nw) {
			return nil, invalid(fmt.Sprintf("%s: the new CA is the one in use", c.kind))
		}
		if in.Stage == pki.StageReissue && c.in.Issuer == "" {
			return nil, invalid(fmt.Sprintf("%s.issuer: the reissue stage needs the new CA's Vault issuer", c.kind))
		}
		r.cas = append(r.cas, rotated{kind: c.kind, old: old, new: nw, in: c.in})
	}
	sa := in.ServiceAccount
	if (sa.OldPublic == "") != (sa.NewPublic == "") {
		return nil, invalid("serviceAccount: give both oldPublic and newPublic, or neither")
	}
	if sa.NewPublic != "" && in.Stage == pki.StageReissue && sa.NewPrivate == "" {
		return nil, invalid("serviceAccount.newPrivate: the reissue stage switches the signing key")
	}
	if len(r.cas) == 0 && sa.NewPublic == "" {
		return nil, invalid("nothing to rotate: give clusterCA, etcdCA, frontProxyCA or serviceAccount")
	}
	return r, nil
}

// plan decides every file of the step.
func (r *rotation) plan(ctx context.Context) error {
	for _, ca := range r.cas {
		if err := r.trustPoints(ctx, ca); err != nil {
			return err
		}
	}
	if r.in.Scope == pki.ScopeKubelet {
		if r.in.Stage == pki.StageReissue && r.cluster() != nil {
			dir, err := r.kubeletClient(ctx)
			if err != nil {
				return err
			}
			return r.kubeletServing(ctx, dir)
		}
		return nil
	}
	if ca := r.cluster(); ca != nil && r.in.StaticPods["kube-controller-manager"] != "" {
		if err := r.signer(ctx, *ca); err != nil {
			return err
		}
	}
	if r.in.ServiceAccount.NewPublic != "" {
		if err := r.serviceAccount(ctx); err != nil {
			return err
		}
	}
	if r.in.Stage == pki.StageReissue {
		return r.reissue(ctx)
	}
	return nil
}

func (r *rotation) cluster() *rotated {
	for i := range r.cas {
		if r.cas[i].kind == layout.CACluster {
			return &r.cas[i]
		}
	}
	return nil
}

// want is what a trust point of ca holds at this stage.
func (r *rotation) want(ca rotated) []*x509.Certificate {
	if r.in.Stage == pki.StageDrop {
		return []*x509.Certificate{ca.new}
	}
	return []*x509.Certificate{ca.old, ca.new}
}

// mine says whether a trust point read by readers is this step's: the
// kubelet scope takes those only kubelets read, the control plane the
// rest.
func (r *rotation) mine(readers []string) bool {
	kubeletOnly := !slices.ContainsFunc(readers, func(s string) bool { return s != "kubelet" })
	return kubeletOnly == (r.in.Scope == pki.ScopeKubelet)
}

// trustPoints writes what the stage wants to each trust point of ca.
func (r *rotation) trustPoints(ctx context.Context, ca rotated) error {
	want := r.want(ca)
	for _, tp := range (layout.Layout{Files: r.in.Files}).TrustPoints(ca.kind) {
		if !r.mine(tp.Readers) {
			continue
		}
		if tp.Signer && r.in.Stage != pki.StageDrop && r.in.StaticPods["kube-controller-manager"] == "" {
			return invalid(fmt.Sprintf("%s on %s is the CSR signer's certificate but the layout names no controller-manager manifest to give the signer a file of its own", tp.Path, r.in.Target.Node))
		}
		cur, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: tp.Path, Missing: "empty"})
		if err != nil {
			return err
		}
		if !cur.Exists {
			continue // a kubelet not bootstrapped yet has no kubeconfig
		}
		var content []byte
		if tp.Kubeconfig {
			content, err = r.kubeconfigTrust(ctx, tp, cur, want)
		} else if !sameCerts([]byte(cur.Content), want) {
			content = pemCerts(want)
		}
		if err != nil {
			return err
		}
		if content == nil {
			continue
		}
		r.add(host.BundleFile{Path: tp.Path, Content: string(content), Mode: cur.Mode}, tp.Readers...)
	}
	return nil
}

// kubeconfigTrust is a kubeconfig with its clusters' CA data set to want,
// or nil when it holds that already. A kubeconfig that names a CA file
// instead makes that file a trust point of the same readers.
func (r *rotation) kubeconfigTrust(ctx context.Context, tp layout.TrustPoint, cur host.ReadFileResult, want []*x509.Certificate) ([]byte, error) {
	doc, file, err := setCAData([]byte(cur.Content), want)
	if err != nil {
		return nil, invalid(fmt.Sprintf("%s on %s: %v", tp.Path, r.in.Target.Node, err))
	}
	if file == "" {
		return doc, nil
	}
	if slices.ContainsFunc(r.files, func(f host.BundleFile) bool { return f.Path == file }) || file == r.in.Files[layout.FileClusterSigner] {
		return nil, nil
	}
	ca, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: file})
	if err != nil {
		return nil, err
	}
	if !sameCerts([]byte(ca.Content), want) {
		r.add(host.BundleFile{Path: file, Content: string(pemCerts(want)), Mode: ca.Mode}, tp.Readers...)
	}
	return nil, nil
}

// add puts f in the bundle, read (and so restarted) by readers.
func (r *rotation) add(f host.BundleFile, readers ...string) {
	r.files = append(r.files, f)
	for _, c := range readers {
		if r.readers[f.Path] == "" {
			r.readers[f.Path] = c
		}
		if c != "kubectl" && (c != "kubelet" || r.in.Scope == pki.ScopeKubelet) {
			r.restart[c] = true
		}
	}
}

// signer keeps the controller manager's CSR signer on one certificate:
// the trust stage gives it files of its own when it shares one with a
// trust point, the reissue stage makes it the new CA, the drop stage
// points it back at the (new) files it had.
func (r *rotation) signer(ctx context.Context, ca rotated) error {
	manifest := r.in.StaticPods["kube-controller-manager"]
	m, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: manifest})
	if err != nil {
		return err
	}
	certPath, keyPath := r.in.Files[layout.FileClusterSigner], r.in.Files[layout.FileClusterCAKey]
	if certPath == "" || keyPath == "" {
		return invalid(fmt.Sprintf("%s on %s names no --cluster-signing-cert-file and -key-file", manifest, r.in.Target.Node))
	}
	shared := slices.ContainsFunc((layout.Layout{Files: r.in.Files}).TrustPoints(layout.CACluster), func(tp layout.TrustPoint) bool { return tp.Signer })
	switch r.in.Stage {
	case pki.StageTrust:
		if !shared {
			return nil
		}
		dir := path.Dir(certPath)
		doc, err := splitSigner([]byte(m.Content), path.Join(dir, signerCert), path.Join(dir, signerKey))
		if err != nil {
			return invalid(fmt.Sprintf("%s on %s: %v", manifest, r.in.Target.Node, err))
		}
		cert, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: certPath})
		if err != nil {
			return err
		}
		key, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: keyPath})
		if err != nil {
			return err
		}
		// The signer keeps signing with the CA in use, now from its own
		// files; the shared file becomes a trust point like the others.
		old, err := firstCert([]byte(cert.Content))
		if err != nil || !old.Equal(ca.old) {
			return invalid(fmt.Sprintf("%s on %s is not the cluster CA in use", certPath, r.in.Target.Node))
		}
		r.newFile(ctx, path.Join(dir, signerCert), string(pemCerts([]*x509.Certificate{old})), certPath)
		r.newFile(ctx, path.Join(dir, signerKey), key.Content, keyPath)
		r.add(host.BundleFile{Path: manifest, Content: string(doc), Mode: m.Mode}, "kube-controller-manager")
		r.readers[manifest] = "kubelet"
		return nil // the shared file is a trust point: trustPoints wrote it
	case pki.StageReissue:
		if shared {
			return invalid(fmt.Sprintf("%s on %s is both the CSR signer's certificate and a trust point: run the trust stage first", certPath, r.in.Target.Node))
		}
		if ca.in.Key == "" {
			return invalid("clusterCA.key: the reissue stage gives the controller manager's signer the new CA's key")
		}
		return r.signWith(ctx, certPath, keyPath, ca)
	default:
		origCert, origKey, doc, ok := unsplitSigner([]byte(m.Content))
		if !ok {
			return r.signWith(ctx, certPath, keyPath, ca)
		}
		if err := r.signWith(ctx, origCert, origKey, ca); err != nil {
			return err
		}
		r.add(host.BundleFile{Path: manifest, Content: string(doc), Mode: m.Mode}, "kube-controller-manager")
		r.readers[manifest] = "kubelet"
		return nil
	}
}

// signWith makes certPath and keyPath the new cluster CA and its key.
func (r *rotation) signWith(ctx context.Context, certPath, keyPath string, ca rotated) error {
	if ca.in.Key == "" {
		return invalid("clusterCA.key: the controller manager's signer needs the new CA's key")
	}
	cert, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: certPath})
	if err != nil {
		return err
	}
	if c, err := firstCert([]byte(cert.Content)); err != nil || !c.Equal(ca.new) || len(pemBlocks([]byte(cert.Content), "CERTIFICATE")) != 1 {
		if !slices.ContainsFunc(r.files, func(f host.BundleFile) bool { return f.Path == certPath }) {
			r.add(host.BundleFile{Path: certPath, Content: string(pemCerts([]*x509.Certificate{ca.new})), Mode: cert.Mode}, "kube-controller-manager")
		} else {
			r.setContent(certPath, string(pemCerts([]*x509.Certificate{ca.new})))
		}
	}
	key, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: keyPath})
	if err != nil {
		return err
	}
	if strings.TrimSpace(key.Content) != strings.TrimSpace(ca.in.Key) {
		r.add(host.BundleFile{Path: keyPath, Content: ca.in.Key, Mode: key.Mode}, "kube-controller-manager")
	}
	return nil
}

func (r *rotation) setContent(p, content string) {
	for i := range r.files {
		if r.files[i].Path == p {
			r.files[i].Content = content
		}
	}
}

// newFile adds a file the rotation makes beside like, with like's mode
// and owner.
func (r *rotation) newFile(ctx context.Context, p, content, like string) {
	st, err := r.a.Hosts.Stat(ctx, r.in.Target, like)
	f := host.BundleFile{Path: p, Content: content}
	if err == nil && st.Exists {
		f.Mode, f.Owner = st.Mode, fmt.Sprintf("%d:%d", st.UID, st.GID)
	} else {
		f.Mode, f.Owner = layout.Documented(r.in.Kind, p, true)
	}
	r.add(f, "kube-controller-manager")
}

// serviceAccount: both public keys verify (trust, reissue), the new key
// signs (reissue, drop), the new public key alone verifies (drop).
func (r *rotation) serviceAccount(ctx context.Context) error {
	sa := r.in.ServiceAccount
	pubPath, keyPath := r.in.Files[layout.FileServiceAccountP], r.in.Files[layout.FileServiceAccountK]
	if pubPath == "" || keyPath == "" {
		return invalid(fmt.Sprintf("files: the layout names no service-account key and public key on %s", r.in.Target.Node))
	}
	pub, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: pubPath})
	if err != nil {
		return err
	}
	want := [][]byte{[]byte(sa.OldPublic), []byte(sa.NewPublic)}
	if r.in.Stage == pki.StageDrop {
		want = want[1:]
	}
	if !samePEM([]byte(pub.Content), want) {
		var b []byte
		for _, w := range want {
			b = append(b, bytes.TrimSpace(w)...)
			b = append(b, '\n')
		}
		r.add(host.BundleFile{Path: pubPath, Content: string(b), Mode: pub.Mode}, "kube-apiserver")
	}
	if r.in.Stage == pki.StageTrust || sa.NewPrivate == "" {
		return nil
	}
	key, err := r.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: r.in.Target, Path: keyPath})
	if err != nil {
		return err
	}
	if strings.TrimSpace(key.Content) != strings.TrimSpace(sa.NewPrivate) {
		r.add(host.BundleFile{Path: keyPath, Content: strings.TrimSpace(sa.NewPrivate) + "\n", Mode: key.Mode}, "kube-apiserver", "kube-controller-manager")
	}
	return nil
}

// reissue issues anew, from the new CA, every certificate of the
// controller the old one signed: same subject and SANs, a new key.
func (r *rotation) reissue(ctx context.Context) error {
	creds, err := r.a.credentials(ctx, pki.RenewInput{Target: r.in.Target, Files: r.in.Files})
	if err != nil {
		return err
	}
	ttl := r.in.TTL
	if ttl == "" {
		ttl = "8760h"
	}
	for _, c := range creds {
		cur, file, err := r.a.current(ctx, r.in.Target, c)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(r.cas, func(ca rotated) bool { return cur.CheckSignatureFrom(ca.old) == nil })
		if i < 0 {
			continue // from the new CA already, or from one not rotated
		}
		ca := r.cas[i]
		dns := slices.Clone(cur.DNSNames)
		if c.addDNS != "" && !slices.Contains(dns, c.addDNS) {
			dns = append(dns, c.addDNS)
		}
		var ips []string
		for _, ip := range cur.IPAddresses {
			ips = append(ips, ip.String())
		}
		issued, err := r.a.Vault.IssueCert(ctx, vault.IssueCertInput{Vault: r.in.Vault, CommonName: cur.Subject.CommonName,
			Organization: cur.Subject.Organization, AltNames: dns, IPSANs: ips, Issuer: ca.in.Issuer, Verbatim: true,
			TTL: ttl, NotAfter: ca.new.NotAfter.UTC().Format(time.RFC3339)})
		if err != nil {
			return err
		}
		leaf, err := firstCert([]byte(issued.Certificate))
		if err != nil || leaf.CheckSignatureFrom(ca.new) != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("Vault issuer %s did not sign %s with %q", ca.in.Issuer, c.cert, ca.new.Subject.CommonName), errtype.ForeignIssuer, nil)
		}
		var key host.FileStat
		if c.kubeconfig == "" && c.key != c.cert {
			if key, err = r.a.Hosts.Stat(ctx, r.in.Target, c.key); err != nil {
				return err
			}
		}
		if c.kubeconfig != "" {
			// Its CA data may be in the bundle already (trust points
			// come first): replace the credential in that content.
			if i := slices.IndexFunc(r.files, func(f host.BundleFile) bool { return f.Path == c.kubeconfig }); i >= 0 {
				file.Content = r.files[i].Content
				r.files = slices.Delete(r.files, i, i+1)
			}
		}
		files, err := c.replace(file, key, r.in.Kind, issued.Certificate, issued.PrivateKey)
		if err != nil {
			return invalid(fmt.Sprintf("%s on %s: %v", c.cert, r.in.Target.Node, err))
		}
		for _, f := range files {
			reader := c.reader
			if c.etcd {
				reader = "etcd"
			}
			r.add(f, reader)
		}
		r.res.Reissued = append(r.res.Reissued, c.cert)
	}
	return nil
}

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

// splitSigner points the controller manager's signer flags at its own
// files, recording each flag's value before on its line.
func splitSigner(doc []byte, cert, key string) ([]byte, error) {
	lines := strings.Split(string(doc), "\n")
	found := 0
	for i, l := range lines {
		for _, f := range []struct{ flag, to string }{{flagSignerCert, cert}, {flagSignerKey, key}} {
			j := strings.Index(l, f.flag)
			if j < 0 || strings.Contains(l, signerWas) {
				continue
			}
			was := strings.TrimSpace(l[j+len(f.flag):])
			if was == "" || strings.ContainsAny(was, " #\"'") {
				return nil, fmt.Errorf("%s has a value Kedge does not change: %q", strings.TrimSuffix(f.flag, "="), l)
			}
			lines[i] = l[:j] + f.flag + f.to + signerWas + was
			found++
		}
	}
	if found != 2 {
		return nil, fmt.Errorf("want one %s and one %s argument, each on a line of its own", strings.TrimSuffix(flagSignerCert, "="), strings.TrimSuffix(flagSignerKey, "="))
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// unsplitSigner undoes splitSigner: the flags' values before, and the
// manifest with them back. ok is false for a manifest never split.
func unsplitSigner(doc []byte) (cert, key string, out []byte, ok bool) {
	lines := strings.Split(string(doc), "\n")
	for i, l := range lines {
		k := strings.Index(l, signerWas)
		if k < 0 {
			continue
		}
		was := strings.TrimSpace(l[k+len(signerWas):])
		for _, f := range []string{flagSignerCert, flagSignerKey} {
			if j := strings.Index(l, f); j >= 0 && j < k {
				lines[i] = l[:j] + f + was
				if f == flagSignerCert {
					cert = was
				} else {
					key = was
				}
			}
		}
	}
	if cert == "" || key == "" {
		return "", "", nil, false
	}
	return cert, key, []byte(strings.Join(lines, "\n")), true
}

// setCAData sets every cluster's certificate-authority-data of a
// kubeconfig to cas, one base64 line (Typhoon's kubelet unit reads it
// with grep and awk), or returns the CA file a cluster names instead.
// The document is nil when it holds cas already.
func setCAData(doc []byte, cas []*x509.Certificate) (out []byte, file string, err error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, "", err
	}
	if len(root.Content) != 1 {
		return nil, "", fmt.Errorf("not a kubeconfig")
	}
	clusters := lookup(root.Content[0], "clusters")
	if clusters == nil || clusters.Kind != yaml.SequenceNode || len(clusters.Content) == 0 {
		return nil, "", fmt.Errorf("no clusters")
	}
	changed := false
	data := base64.StdEncoding.EncodeToString(pemCerts(cas))
	for _, c := range clusters.Content {
		cl := lookup(c, "cluster")
		if cl == nil {
			return nil, "", fmt.Errorf("a cluster without server")
		}
		if f := lookup(cl, "certificate-authority"); f != nil && f.Value != "" {
			return nil, f.Value, nil
		}
		v := lookup(cl, "certificate-authority-data")
		if v == nil {
			return nil, "", fmt.Errorf("a cluster has no certificate-authority-data")
		}
		cur, err := base64.StdEncoding.DecodeString(v.Value)
		if err == nil && sameCerts(cur, cas) {
			continue
		}
		v.Value, v.Style, changed = data, 0, true
	}
	if !changed {
		return nil, "", nil
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, "", err
	}
	if err := enc.Close(); err != nil {
		return nil, "", err
	}
	return b.Bytes(), "", nil
}

// pemCerts is the certificates as PEM, in order.
func pemCerts(cs []*x509.Certificate) []byte {
	var b []byte
	for _, c := range cs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

// pemBlocks is every PEM block of the type in data.
func pemBlocks(data []byte, typ string) [][]byte {
	var out [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if typ == "" || b.Type == typ {
			out = append(out, b.Bytes)
		}
	}
}

// sameCerts: data holds exactly the certificates want, in any order.
func sameCerts(data []byte, want []*x509.Certificate) bool {
	var raws [][]byte
	for _, c := range want {
		raws = append(raws, c.Raw)
	}
	return sameSet(pemBlocks(data, "CERTIFICATE"), raws)
}

// samePEM: data holds exactly the PEM blocks of want, in any order.
func samePEM(data []byte, want [][]byte) bool {
	var raws [][]byte
	for _, w := range want {
		raws = append(raws, pemBlocks(w, "")...)
	}
	return sameSet(pemBlocks(data, ""), raws)
}

func sameSet(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y []byte) bool { return bytes.Equal(x, y) }) {
			return false
		}
	}
	return true
}
