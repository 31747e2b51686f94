// Command kedge-lab is `make dev`: SSH test hosts on loopback, an inventory
// for them, and `kedge dev` (Temporal server, Web UI, worker) in one process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/internal/devserver"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

func main() {
	dir := flag.String("dir", ".lab", "where the lab keeps keys, host files and Temporal state")
	n := flag.Int("hosts", 3, "number of SSH hosts (one controller, the rest workers)")
	baseIP := flag.String("base-ip", "127.0.10.", "hosts listen on BASE-IP.1, .2, ... port 22")
	addr := flag.String("address", "127.0.0.1:7233", "Temporal frontend address")
	ui := flag.String("ui-address", "127.0.0.1:8233", "Web UI address")
	kube := flag.Bool("kube", true, "start a Kubernetes control plane and join every host to it (needs `make kube-tools`)")
	withVault := flag.Bool("vault", true, "start a Vault (PKI, SSH CA, KV) and name it in the inventories (needs `make vault-tools`)")
	bare := flag.Int("bare", 3, "bare hosts for `kedge run bootstrap` (one controller, the rest workers; on BARE-IP); 0 for none")
	bareIP := flag.String("bare-ip", "127.0.11.", "bare hosts listen on BARE-IP.1, .2, ...")
	team := flag.Bool("team", false, "run docker-compose.yml's team install (Temporal on PostgreSQL, two workers, webhook, codec server, Web UI) as local processes instead of `kedge dev`")
	flag.Parse()
	o := options{dir: *dir, n: *n, baseIP: *baseIP, addr: *addr, ui: *ui, kube: *kube, vault: *withVault, bare: *bare, bareIP: *bareIP, team: *team}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "kedge-lab:", err)
		os.Exit(1)
	}
}

// joinControlPlane starts etcd, kube-apiserver, controller-manager and
// scheduler under dir and joins every host to them with a simulated
// kubelet, then waits until every Node is Ready.
func joinControlPlane(ctx context.Context, dir string, hosts *testhosts.Lab) (*controlplane.ControlPlane, error) {
	fmt.Println("starting the control plane...")
	// A fresh control plane each time: the hosts' kubelets register anew.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("control plane: %w (build the binaries once with `make kube-tools`, or run with --kube=false)", err)
	}
	for _, h := range hosts.Hosts {
		kc, err := cp.NodeKubeconfig(h.Name)
		if err != nil {
			cp.Stop()
			return nil, err
		}
		if err := lab.InstallKubelet(ctx, h, kc, h.Name, lab.KubeletImage); err != nil {
			cp.Stop()
			return nil, err
		}
	}
	for ready := 0; ready < len(hosts.Hosts); {
		select {
		case <-ctx.Done():
			cp.Stop()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		ready = 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		fmt.Printf("\r%d of %d nodes Ready", ready, len(hosts.Hosts))
	}
	fmt.Println()
	return cp, nil
}

type options struct {
	dir, baseIP, addr, ui, bareIP string
	n, bare                       int
	kube, vault, team             bool
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	n, baseIP, addr, ui, kube := o.n, o.baseIP, o.addr, o.ui, o.kube
	if err := testhosts.RequireTools(); err != nil {
		return err
	}
	hosts, err := testhosts.Start(ctx, testhosts.Options{Count: n, Names: lab.Names(n), BaseIP: baseIP, Dir: filepath.Join(dir, "hosts")})
	if err != nil {
		return err
	}
	defer hosts.Close()
	text := lab.Inventory("lab", hosts, hosts.KnownHostsFile)
	if kube {
		cp, err := joinControlPlane(ctx, filepath.Join(dir, "kube"), hosts)
		if err != nil {
			return err
		}
		defer cp.Stop()
		text = strings.Replace(text, "controllers:\n", "kubernetes:\n  kubeconfig: "+cp.AdminKubeconfig+"\ncontrollers:\n", 1)
		fmt.Printf("control plane at %s; kubectl: KUBECONFIG=%s\n", cp.Server, cp.AdminKubeconfig)
	}
	vaultSection := ""
	if o.vault {
		v, err := startVault(ctx, filepath.Join(dir, "vault"))
		if err != nil {
			return err
		}
		defer v.Stop()
		vaultSection = fmt.Sprintf("vault:\n  address: %s\n  tokenFile: %s\n  pki: %s\n  role: %s\n  kv: %s\n",
			v.Address, filepath.Join(dir, "vault", "token"), vaultlab.PKIPath, vaultlab.PKIRole, vaultlab.KVPath)
		text = strings.Replace(text, "controllers:\n", vaultSection+"controllers:\n", 1)
		fmt.Printf("vault at %s (token in %s)\n", v.Address, filepath.Join(dir, "vault", "token"))
	}
	inv := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, []byte(text), 0o644); err != nil {
		return err
	}
	bareInv := ""
	if o.bare > 0 && o.vault {
		bl, path, err := bareHosts(ctx, dir, o.bare, o.bareIP, vaultSection)
		if err != nil {
			return err
		}
		defer bl.Close()
		bareInv = path
	}
	served := []string{inv} // the lab's worker serves its own clusters only
	if bareInv != "" {
		served = append(served, bareInv)
	}
	if o.team {
		return runTeam(ctx, dir, served)
	}
	return starter.RunDev(ctx, starter.DevOptions{
		DataDir: filepath.Join(dir, "temporal"), Address: addr, UIAddress: ui, Namespace: "default", TaskQueue: workflows.DefaultTaskQueue,
		Clusters: served,
		Ready: func(s *devserver.Server) {
			fmt.Printf("\nkedge lab is up: %d SSH hosts, inventory %s\n", n, inv)
			fmt.Printf("try:  bin/kedge run examples/hello.yaml --inventory %s --wait\n", inv)
			if kube {
				fmt.Printf("      bin/kedge run kubelet-image-swap --inventory %s --set image=quay.io/poseidon/kubelet:v1.35.4 --set maxUnavailable=2 --wait\n", inv)
				fmt.Printf("        (it waits after the workers: bin/kedge approve ID --step approve-controllers, or --set approveControllers=false)\n")
			}
			if bareInv != "" {
				fmt.Printf("      bin/kedge run bootstrap --inventory %s --wait      (a cluster from %d bare hosts)\n", bareInv, o.bare)
				fmt.Printf("      bin/kedge run cert-renewal --inventory %s --set threshold=43800h --wait      (every certificate due, not the CA)\n", bareInv)
			}
			fmt.Printf("then open %s to see it in the Temporal Web UI\n\n", s.UIURL())
		},
	}, os.Stderr)
}
