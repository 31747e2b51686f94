package pkihost

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/pki"
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

func (r *rotation) setContent(p, content string) {
	for i := range r.files {
		if r.files[i].Path == p {
			r.files[i].Content = content
		}
	}
}
