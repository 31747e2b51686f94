package pkihost

import (
	"context"
	"crypto/x509"
	"fmt"
	"path"
	"slices"
	"strings"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/pki"
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
