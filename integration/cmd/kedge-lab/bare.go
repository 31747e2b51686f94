package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/vaultlab"
)

// startVault starts the lab's Vault and writes its token where the
// inventory's vault.tokenFile says (owner-only).
func startVault(ctx context.Context, dir string) (*vaultlab.Vault, error) {
	fmt.Println("starting vault...")
	v, err := vaultlab.Start(ctx, vaultlab.Options{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("vault: %w (build it once with `make vault-tools`, or run with --vault=false)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(v.Token+"\n"), 0o600); err != nil {
		v.Stop()
		return nil, err
	}
	return v, nil
}

// bareHosts starts hosts nothing is installed on but the container
// runtime stand-in, whose image map sends the control plane's images to
// the binaries the tools module built: `kedge run bootstrap` builds a
// cluster on them from its own rendered assets.
func bareHosts(ctx context.Context, dir string, n int, baseIP, vaultSection string) (*testhosts.Lab, string, error) {
	tools, err := controlplane.Tools()
	if err != nil {
		return nil, "", err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bare-%d", i+1)
	}
	// Bare means bare: nothing from an earlier lab survives.
	if err := os.RemoveAll(filepath.Join(dir, "bare")); err != nil {
		return nil, "", err
	}
	l, err := testhosts.Start(ctx, testhosts.Options{Count: n, Names: names, BaseIP: baseIP, Dir: filepath.Join(dir, "bare")})
	if err != nil {
		return nil, "", err
	}
	images := "quay.io/poseidon/kubelet /usr/local/sbin/kubelet-sim\n"
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		p, err := l.Hosts[0].InstallProgram(c, filepath.Join(tools, c))
		if err != nil {
			l.Close()
			return nil, "", err
		}
		images += "registry.k8s.io/" + c + " " + p + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kedge/v1\nkind: Cluster\nmetadata:\n  name: bare\n")
	fmt.Fprintf(&b, "ssh:\n  user: core\n  become: sudo\n  identityFile: %s\n  knownHostsFile: %s\n", l.IdentityFile, l.KnownHostsFile)
	fmt.Fprintf(&b, "kubernetes:\n  kubeconfig: %s\n  kubeletImage: quay.io/poseidon/kubelet:v1.35.4\n", filepath.Join(dir, "bare", "admin.conf"))
	b.WriteString(vaultSection)
	for i, h := range l.Hosts {
		if err := h.WriteFile("/etc/kedge-lab/images", []byte(images), 0o644); err != nil {
			l.Close()
			return nil, "", err
		}
		switch i {
		case 0:
			b.WriteString("controllers:\n")
		case 1:
			b.WriteString("workers:\n")
		}
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n", h.Name, h.Address)
	}
	inv := filepath.Join(dir, "bare-inventory.yaml")
	if err := os.WriteFile(inv, []byte(b.String()), 0o644); err != nil {
		l.Close()
		return nil, "", err
	}
	return l, inv, nil
}
