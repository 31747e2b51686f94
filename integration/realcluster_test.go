package integration

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/integration/images"
	"kedge.dev/kedge/integration/realnode"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/workflows"
)

// realCluster is a cluster Kedge's bootstrap built on three real
// kubelets: its first node the controller, the others workers.
type realCluster struct {
	name       string // the cluster's (the inventory's, Vault's paths)
	nodes      []*realSSHNode
	ctl        *realSSHNode
	inventory  string
	kubeconfig string // the admin kubeconfig the inventory names
	client     kubernetes.Interface
	archives   []string // the control-plane images, imported on every node
}

// bootstrapRealCluster starts three bare real nodes named prefix-1..3
// (their own namespaces and containerd, no pod network, no kubelet unit,
// reached over SSH as core with sudo, routed to each other through the
// machine) with the control-plane and kube-proxy images, and runs
// bootstrap on them as the cluster name: its CAs in Vault, the
// controller's PKI, kubeconfigs and static pods (etcd among them) run by
// its real kubelet, the workers joined through TLS bootstrap. It logs the
// time of each part.
func bootstrapRealCluster(ctx context.Context, t testing.TB, tools, name, prefix string) *realCluster {
	t.Helper()
	v, tokenFile := labVault(t)
	bin, err := images.KubeletBinary(ctx, tools, images.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	image := images.KubeletRef(images.KubeVersion)
	cpImages, err := images.ControlPlane(tools)
	if err != nil {
		t.Fatal(err)
	}
	archives, err := images.Build(cpImages...)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var opts []realnode.Options
	for i := 1; i <= 3; i++ {
		opts = append(opts, realnode.Options{Name: fmt.Sprintf("%s-%d", prefix, i), NoPodNetwork: true, Routed: true, KubeProxy: true})
	}
	nodes := startRealSSHNodes(ctx, t, opts, realnode.KubeletImage{Ref: image, Binary: bin})
	ctl := nodes[0]
	for _, n := range nodes {
		// The control plane's on the controller, kube-proxy's everywhere:
		// importing them all is as quick.
		if err := n.node.Import(ctx, archives...); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("three bare nodes with the control-plane and kube-proxy images: %s", time.Since(start).Round(time.Millisecond))

	kubeconfig := filepath.Join(t.TempDir(), "admin.conf")
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kedge/v1\nkind: Cluster\nmetadata:\n  name: %s\n", name)
	fmt.Fprintf(&b, "ssh:\n  user: core\n  become: sudo\n  identityFile: %s\n  knownHostsFile: %s\n", ctl.lab.IdentityFile, ctl.lab.KnownHostsFile)
	fmt.Fprintf(&b, "kubernetes:\n  kubeconfig: %s\n  kubeletImage: %s\n  clusterDNS: [10.96.0.10]\n", kubeconfig, image)
	fmt.Fprintf(&b, "vault:\n  address: %s\n  tokenFile: %s\n  pki: %s\n  role: %s\n  kv: %s\n", v.Address, tokenFile, vaultlab.PKIPath, vaultlab.PKIRole, vaultlab.KVPath)
	fmt.Fprintf(&b, "controllers:\n  - name: %s\n    address: %s\n", ctl.node.Name, ctl.node.NodeIP)
	b.WriteString("workers:\n")
	for _, w := range nodes[1:] {
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n", w.node.Name, w.node.NodeIP)
	}
	inv := writeInventory(t, b.String())

	start = time.Now()
	p, code, errOut := runWaitInv(t, "bootstrap", inv)
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("bootstrap: exit %d: %s\n%+v%s%s", code, errOut, p, ctl.node.UnitLog(ctl.host, "kubelet"), ctl.node.Diagnose(ctx))
	}
	t.Logf("bootstrap of 1 controller + 2 workers on real kubelets: %s", time.Since(start).Round(time.Millisecond))

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &realCluster{name: name, nodes: nodes, ctl: ctl, inventory: inv, kubeconfig: kubeconfig, client: cs, archives: archives}
}

// realShared is the real-kubelet cluster bootstrap builds once for the
// tests that need one as bootstrap leaves it:
// TestRealKubeletBootstrapAndCertRenewal checks the bootstrap and the
// renewal, TestRealKubeletCARotation then replaces its CAs and closes it.
var realShared struct {
	once  sync.Once
	scope *sharedScope
	rc    *realCluster
	err   error

	renewOnce sync.Once
	renewal   *realRenewal
	renewErr  error
}

// sharedRealCluster is the shared real-kubelet cluster, bootstrapped by
// the first test that asks.
func sharedRealCluster(t *testing.T, tools string) *realCluster {
	t.Helper()
	realShared.once.Do(func() {
		// Left set if the build stops the building test (t.Fatal).
		realShared.err = fmt.Errorf("the shared real cluster was not built: %s failed building it", t.Name())
		realShared.scope = newSharedScope(t, "realboot")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		realShared.rc = bootstrapRealCluster(ctx, realShared.scope, tools, "realboot", "real-boot")
		realShared.err = nil
	})
	if realShared.err != nil {
		t.Fatal(realShared.err)
	}
	return realShared.rc
}

// closeSharedRealCluster stops the shared cluster's nodes: t, its last
// test, is over, and fails if the teardown leaves anything behind.
func closeSharedRealCluster(t *testing.T) {
	if realShared.scope != nil {
		realShared.scope.close(t)
	}
	realShared.err = fmt.Errorf("the shared real cluster was stopped after its last test")
}

// realRenewal is what cert-renewal with every certificate due did to the
// shared cluster: the endpoints it serves, their certificates and the CAs
// before it, and how long it took.
type realRenewal struct {
	endpoints              []string
	before                 map[string]*x509.Certificate
	caBefore, etcdCABefore []byte
	took                   time.Duration
}

// renewedRealCluster is the shared cluster once cert-renewal renewed
// every certificate it serves (a 5-year threshold, not the 10-year CAs):
// run by the first test that asks, which fails if the run did.
func renewedRealCluster(t *testing.T, tools string) (*realCluster, *realRenewal) {
	t.Helper()
	rc := sharedRealCluster(t, tools)
	realShared.renewOnce.Do(func() {
		realShared.renewErr = fmt.Errorf("cert-renewal of the shared real cluster: %s failed running it", t.Name())
		ctl := rc.ctl
		r := &realRenewal{endpoints: []string{net.JoinHostPort(ctl.node.NodeIP, "6443"), net.JoinHostPort(ctl.node.NodeIP, "2379")},
			before: map[string]*x509.Certificate{}}
		for _, n := range rc.nodes {
			r.endpoints = append(r.endpoints, net.JoinHostPort(n.node.NodeIP, "10250"))
		}
		for _, ep := range r.endpoints {
			r.before[ep] = servedCert(t, ep)
		}
		r.caBefore = []byte(ctl.file(t, "/etc/kubernetes/pki/ca.crt"))
		r.etcdCABefore = []byte(ctl.file(t, "/etc/kubernetes/pki/etcd/ca.crt"))
		start := time.Now()
		p, code, errOut := runWaitInv(t, "cert-renewal", rc.inventory, "--set", "threshold=43800h")
		if code != 0 || p.State != workflows.StateSucceeded {
			t.Fatalf("cert-renewal: exit %d: %s\n%+v%s%s", code, errOut, p, ctl.node.UnitLog(ctl.host, "kubelet"), ctl.node.Diagnose(t.Context()))
		}
		r.took = time.Since(start)
		node := workflows.NodeWorkflowID(rc.name, ctl.node.Name)
		t.Logf("cert-renewal on real kubelets: %s; %s:%s%s", slowSteps(p), ctl.node.Name,
			runStepTimes(t.Context(), node), runStepTimes(t.Context(), node+"/renew"))
		realShared.renewal, realShared.renewErr = r, nil
	})
	if realShared.renewErr != nil {
		t.Fatal(realShared.renewErr)
	}
	return rc, realShared.renewal
}
