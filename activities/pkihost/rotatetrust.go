package pkihost

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/pki"
)

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
