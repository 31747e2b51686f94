package pkihost

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/pki"
)

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
