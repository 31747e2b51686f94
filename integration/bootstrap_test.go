package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/workflows"
)

// bootstrapped is a cluster the bootstrap runbook built from nothing on
// four bare hosts: controller boot-1, workers boot-2..4.
var bootstrapped struct {
	once       sync.Once
	lab        *testhosts.Lab
	inventory  string
	kubeconfig string
	client     kubernetes.Interface
	progress   workflows.Progress
	err        error
	closed     sync.Once
}

// closeBootstrapped stops the bootstrapped cluster's hosts, once: after
// its last test, or at the end.
func closeBootstrapped() {
	bootstrapped.closed.Do(func() {
		if bootstrapped.lab != nil {
			_ = bootstrapped.lab.Close()
		}
		if bootstrapped.err == nil {
			bootstrapped.err = fmt.Errorf("the bootstrapped cluster was stopped after TestCertRenewalRenewsEveryServedCertificate (its last test)")
		}
	})
}

const bootstrapImage = "quay.io/poseidon/kubelet:v1.35.4"

// bootLab starts the four bare hosts: controller boot-1, workers
// boot-2..4.
func bootLab(t *testing.T) (*testhosts.Lab, string) {
	t.Helper()
	return kedgeLab(t, kedgeLabSpec{cluster: "boot", dir: "boot", baseIP: "127.0.25.",
		controllers: []string{"boot-1"}, workers: []string{"boot-2", "boot-3", "boot-4"},
		labels: map[string]string{"boot-4": "node.kubernetes.io/pool=edge"},
		// Every listener on the node's address: the lanes' worlds run
		// beside it (kubeadm's listeners are the real kubelets'
		// cluster's, in network namespaces of its own).
		kubernetes: "  controlPlaneListen: node\n",
	}, func(l *testhosts.Lab) {
		bootstrapped.lab = l
		atWorldEnd(closeBootstrapped)
	})
}

// kedgeLabSpec is a lab of bare hosts the bootstrap runbook builds a
// cluster of Kedge's layout on.
type kedgeLabSpec struct {
	cluster, dir, baseIP string // dir: under the world's
	controllers, workers []string
	spares               []string          // started, their images known, not in the inventory
	labels               map[string]string // a node's inventory labels
	kubernetes           string            // more lines of the inventory's kubernetes section
}

// kedgeLab starts a spec's hosts, handing the lab to started at once
// (to stop it), and writes its inventory (Vault: labVault). The
// container runtime stand-in of each controller and spare maps the
// control plane's images to the binaries the tools module built; every
// host maps the kubelet image to the simulator.
func kedgeLab(t *testing.T, s kedgeLabSpec, started func(*testhosts.Lab)) (*testhosts.Lab, string) {
	t.Helper()
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	v, tokenFile := labVault(t)
	dir := filepath.Join(world.dir, s.dir)
	names := slices.Concat(s.controllers, s.workers, s.spares)
	l, err := testhosts.Start(context.Background(), testhosts.Options{Count: len(names), Names: names, BaseIP: s.baseIP, Dir: filepath.Join(dir, "hosts")})
	if err != nil {
		t.Fatal(err)
	}
	started(l)
	images := "quay.io/poseidon/kubelet /usr/local/sbin/kubelet-sim\n"
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		var p string
		for _, h := range l.Hosts {
			if slices.Contains(s.workers, h.Name) {
				continue
			}
			if p, err = h.InstallProgram(c, filepath.Join(tools, c)); err != nil {
				t.Fatal(err)
			}
		}
		images += "registry.k8s.io/" + c + " " + p + "\n"
	}
	for _, h := range l.Hosts {
		if err := h.WriteFile("/etc/kedge-lab/images", []byte(images), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kedge/v1\nkind: Cluster\nmetadata:\n  name: %s\n", s.cluster)
	fmt.Fprintf(&b, "ssh:\n  user: core\n  become: sudo\n  identityFile: %s\n  knownHostsFile: %s\n", l.IdentityFile, l.KnownHostsFile)
	kubeconfig := filepath.Join(dir, "admin.conf")
	fmt.Fprintf(&b, "kubernetes:\n  kubeconfig: %s\n  kubeletImage: %s\n  clusterDNS: [10.96.0.10]\n%s", kubeconfig, bootstrapImage, s.kubernetes)
	fmt.Fprintf(&b, "vault:\n  address: %s\n  tokenFile: %s\n  pki: %s\n  role: %s\n  kv: %s\n", v.Address, tokenFile, vaultlab.PKIPath, vaultlab.PKIRole, vaultlab.KVPath)
	for _, group := range []struct {
		key   string
		names []string
	}{{"controllers", s.controllers}, {"workers", s.workers}} {
		if len(group.names) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s:\n", group.key)
		for _, name := range group.names {
			fmt.Fprintf(&b, "  - name: %s\n    address: %s\n", name, hostIn(l, name).Address)
			if labels := s.labels[name]; labels != "" {
				fmt.Fprintf(&b, "    labels: [%s]\n", labels)
			}
		}
	}
	inv := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return l, inv
}

// bootCluster runs bootstrap once and returns the cluster it built.
func bootCluster(t *testing.T) {
	t.Helper()
	bootstrapped.once.Do(func() {
		l, inv := bootLab(t)
		bootstrapped.lab, bootstrapped.inventory = l, inv
		began := time.Now()
		p, code, errOut := runWaitInv(t, "bootstrap", inv)
		t.Logf("bootstrap of 1 controller + 3 workers: %s (exit %d)", time.Since(began).Round(time.Second), code)
		bootstrapped.progress = p
		if code != 0 {
			for _, h := range l.Hosts {
				log, _ := h.ReadFile("/var/log/units/kubelet.service.log")
				t.Logf("%s kubelet log tail:\n%s", h.Name, tail(string(log), 3000))
			}
			bootstrapped.err = fmt.Errorf("bootstrap: exit %d: %s\n%+v", code, errOut, p)
			return
		}
		bootstrapped.kubeconfig = filepath.Join(filepath.Dir(inv), "admin.conf")
		cfg, err := clientcmd.BuildConfigFromFlags("", bootstrapped.kubeconfig)
		if err != nil {
			bootstrapped.err = err
			return
		}
		bootstrapped.client, bootstrapped.err = kubernetes.NewForConfig(cfg)
	})
	if bootstrapped.err != nil {
		t.Fatal(bootstrapped.err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestBootstrapBuildsAClusterFromItsOwnAssets(t *testing.T) {
	mainLane.join(t)
	bootCluster(t)
	ctx := t.Context()
	cs := bootstrapped.client
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		ready[n.Name] = nodeIsReady(&n)
	}
	for _, name := range []string{"boot-1", "boot-2", "boot-3", "boot-4"} {
		if !ready[name] {
			t.Errorf("node %s not Ready (nodes: %v)", name, ready)
		}
	}
	c, err := cs.CoreV1().Nodes().Get(ctx, "boot-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Labels["node-role.kubernetes.io/controller"]; !ok || len(c.Spec.Taints) == 0 || c.Spec.Taints[0].Key != "node-role.kubernetes.io/controller" {
		t.Errorf("controller labels %v taints %v", c.Labels, c.Spec.Taints)
	}
	if w, _ := cs.CoreV1().Nodes().Get(ctx, "boot-4", metav1.GetOptions{}); w == nil || w.Labels["node.kubernetes.io/pool"] != "edge" {
		t.Errorf("worker boot-4 lacks its inventory label")
	}

	// kubectl with the rendered admin kubeconfig.
	tools, _ := controlplane.Tools()
	out, err := exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), "--kubeconfig", bootstrapped.kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
	if err != nil || strings.Count(string(out), "node/") != 4 {
		t.Errorf("kubectl get nodes: %v\n%s", err, out)
	}

	// The API server serves a certificate of the cluster CA, which chains
	// to the Vault PKI root.
	v, _ := labVault(t)
	apiCert := servedCert(t, net.JoinHostPort(bootstrapped.lab.Hosts[0].Address, "6443"))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(v.CACertPEM)
	caPEM := readHostFileIn(t, bootstrapped.lab, "boot-1", "/etc/kubernetes/pki/ca.crt")
	inter := x509.NewCertPool()
	inter.AppendCertsFromPEM(caPEM)
	if _, err := apiCert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the API server's certificate does not chain to Vault's root: %v", err)
	}

	// The issued keys, the CA key and the kubeconfigs never reach the
	// stored histories in plain text.
	for _, id := range runIDs(bootstrapped.progress, "boot", "boot-1", "boot-2", "boot-3", "boot-4") {
		if h := string(storedHistory(t, id)); strings.Contains(h, "PRIVATE KEY") || strings.Contains(h, "client-key-data") || strings.Contains(h, v.Token) {
			t.Errorf("history of %s holds a secret in plain text", id)
		}
		assertSealed(t, id)
	}
}

// etcd trusts its own CA alone. The API server's etcd-client certificate
// opens it; a kubelet's client certificate (the cluster CA signs those,
// also for anyone who joins with a bootstrap token and gets one through a
// CSR) does not, nor does the admin's, on the client port or the peer
// port. etcd's CA is an intermediate of Vault's root, apart from the
// cluster CA.
func TestBootstrapEtcdTrustsOnlyItsOwnCA(t *testing.T) {
	mainLane.join(t)
	bootCluster(t)
	l := bootstrapped.lab
	ctl := l.Hosts[0].Address
	etcdCAPEM := readHostFileIn(t, l, "boot-1", "/etc/kubernetes/pki/etcd/ca.crt")
	clusterCAPEM := readHostFileIn(t, l, "boot-1", "/etc/kubernetes/pki/ca.crt")
	etcdCA, clusterCA := firstCert(t, etcdCAPEM), firstCert(t, clusterCAPEM)
	if bytes.Equal(etcdCA.Raw, clusterCA.Raw) {
		t.Errorf("etcd trusts the cluster CA (%s)", clusterCA.Subject)
	}
	v, _ := labVault(t)
	root := firstCert(t, v.CACertPEM)
	if err := etcdCA.CheckSignatureFrom(root); err != nil || !etcdCA.IsCA {
		t.Errorf("etcd's CA %s is not a CA under Vault's root: %v", etcdCA.Subject, err)
	}

	pair := func(what string, certPEM, keyPEM []byte) tls.Certificate {
		t.Helper()
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return c
	}
	fromKubeconfig := func(what string, data []byte) tls.Certificate {
		t.Helper()
		cfg, err := clientcmd.Load(data)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, u := range cfg.AuthInfos {
			return pair(what, u.ClientCertificateData, u.ClientKeyData)
		}
		t.Fatalf("%s: no user", what)
		return tls.Certificate{}
	}
	file := func(path string) []byte { return readHostFileIn(t, l, "boot-1", path) }
	apiserver := pair("the API server's etcd-client certificate",
		file("/etc/kubernetes/pki/apiserver-etcd-client.crt"), file("/etc/kubernetes/pki/apiserver-etcd-client.key"))
	peer := pair("etcd's peer certificate", file("/etc/kubernetes/pki/etcd/peer.crt"), file("/etc/kubernetes/pki/etcd/peer.key"))
	// A symlink to the dated file, as the real kubelet keeps it: read it
	// from inside the host.
	joined, err := hostIn(l, "boot-2").Exec(t.Context(), "cat", "/var/lib/kubelet/pki/kubelet-client-current.pem")
	if err != nil {
		t.Fatalf("boot-2's kubelet client certificate: %v", err)
	}
	refused := map[string]tls.Certificate{
		"boot-2's kubelet (joined with a bootstrap token, CSR signed by the cluster CA)": pair("boot-2's kubelet", joined, joined),
		"boot-1's kubelet (issued by Vault from the cluster CA)":                         fromKubeconfig("boot-1's kubelet", file("/var/lib/kubelet/kubeconfig")),
		"the admin (system:masters)":                                                     fromKubeconfig("admin.conf", file("/etc/kubernetes/admin.conf")),
	}
	if err := firstCert(t, joined).CheckSignatureFrom(clusterCA); err != nil {
		t.Errorf("boot-2's kubelet certificate is not from the cluster CA: %v", err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(etcdCA)
	// get asks etcd at port for /version with a client certificate: nil
	// when etcd let the request in, whatever it answered. It comes from the
	// controller's address, as a peer would: etcd also checks a peer
	// certificate names the address it connects from.
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ctl)}, Timeout: 5 * time.Second}
	get := func(port string, cert tls.Certificate) error {
		tr := &http.Transport{DialContext: from.DialContext, TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := c.Get("https://" + net.JoinHostPort(ctl, port) + "/version")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	for _, port := range []string{"2379", "2380"} {
		for who, cert := range refused {
			err := get(port, cert)
			if err == nil {
				t.Errorf("etcd at :%s let in %s", port, who)
			} else if !strings.Contains(err.Error(), "remote error: tls:") {
				t.Errorf("etcd at :%s and %s: %v, want etcd to refuse the certificate", port, who, err)
			}
		}
	}
	if err := get("2379", apiserver); err != nil {
		t.Errorf("etcd refuses the API server's etcd-client certificate: %v", err)
	}
	if err := get("2380", peer); err != nil {
		t.Errorf("etcd refuses its own peer certificate on the peer port: %v", err)
	}
}

// servedCert is the leaf certificate a TLS server presents.
func servedCert(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// runIDs lists a run, its rollouts and the node runbooks of the nodes.
func runIDs(p workflows.Progress, cluster string, nodes ...string) []string {
	ids := []string{p.WorkflowID}
	for _, s := range p.Steps {
		if s.Child != "" {
			ids = append(ids, s.Child)
		}
	}
	for _, n := range nodes {
		ids = append(ids, workflows.NodeWorkflowID(cluster, n))
	}
	return ids
}

// With a threshold longer than the cluster CA's life, cert-renewal is
// refused before any host changes, naming the CA, its end and the CA
// rotation runbook. With one longer than every certificate's life but not
// the CA's, every certificate is due: each endpoint then serves a newer
// one from the cluster CA, and the cluster still works.
func TestCertRenewalRenewsEveryServedCertificate(t *testing.T) {
	mainLane.join(t)
	bootCluster(t)
	t.Cleanup(closeBootstrapped) // the last test of this cluster
	l := bootstrapped.lab
	ctl := l.Hosts[0].Address
	endpoints := []string{net.JoinHostPort(ctl, "6443"), net.JoinHostPort(ctl, "2379")}
	for _, h := range l.Hosts {
		endpoints = append(endpoints, net.JoinHostPort(h.Address, "10250"))
	}
	before := map[string]*x509.Certificate{}
	for _, ep := range endpoints {
		before[ep] = servedCert(t, ep)
	}
	filesBefore := firstCert(t, readHostFileIn(t, l, "boot-1", "/etc/kubernetes/pki/etcd/peer.crt"))
	etcdCABefore := readHostFileIn(t, l, "boot-1", "/etc/kubernetes/pki/etcd/ca.crt")

	// The 10-year CAs end within a 10-year window: refused at once.
	p, code, errOut := runWaitInv(t, "cert-renewal", bootstrapped.inventory, "--set", "threshold=87600h")
	refusal := step(t, p, "ca-life").LastError
	if code == 0 || !strings.Contains(refusal, `the cluster CA (kedge/clusters/`) || !strings.Contains(refusal, "within the renewal window (threshold 87600h)") ||
		!strings.Contains(refusal, "run the CA rotation runbook (ca-rotation)") {
		t.Fatalf("cert-renewal with the CA within the window: exit %d: %s\n%+v", code, errOut, p)
	}
	for _, id := range []string{"controllers", "kubelets"} {
		if st := step(t, p, id).State; st == workflows.StateSucceeded || st == workflows.StateRunning {
			t.Errorf("step %s %s after the refusal", id, st)
		}
	}
	for _, ep := range endpoints {
		if now := servedCert(t, ep); now.SerialNumber.Cmp(before[ep].SerialNumber) != 0 {
			t.Errorf("%s serves a new certificate after the refusal", ep)
		}
	}

	// An inventory naming another release than the controller runs (an
	// operator's edit before an upgrade): the renewal would render that
	// release, so it is refused before anything changes.
	other := filepath.Join(t.TempDir(), "inventory.yaml")
	inv := string(must(os.ReadFile(bootstrapped.inventory)))
	if !strings.Contains(inv, "\nkubernetes:\n") || strings.Contains(inv, "\n  version:") {
		t.Fatalf("the inventory's kubernetes section:\n%s", inv)
	}
	if err := os.WriteFile(other, []byte(strings.Replace(inv, "\nkubernetes:\n", "\nkubernetes:\n  version: v1.36.3\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	p, code, errOut = runWaitInv(t, "cert-renewal", other, "--set", "threshold=43800h")
	if code == 0 || !strings.Contains(p.Error+errOut, "and the inventory's kubernetes.version is v1.36.3") {
		t.Fatalf("cert-renewal with the inventory naming v1.36.3: exit %d: %s\n%+v", code, errOut, p)
	}
	for _, ep := range endpoints {
		if now := servedCert(t, ep); now.SerialNumber.Cmp(before[ep].SerialNumber) != 0 {
			t.Errorf("%s serves a new certificate after the refused renewal", ep)
		}
	}
	if now := readHostFileIn(t, l, "boot-1", "/etc/kubernetes/manifests/kube-apiserver.yaml"); !bytes.Contains(now, []byte(":v1.35.4\n")) {
		t.Errorf("the API server's manifest after the refused renewal:\n%s", now)
	}

	// Every certificate due (5 years), not the 10-year CA.
	p, code, errOut = runWaitInv(t, "cert-renewal", bootstrapped.inventory, "--set", "threshold=43800h")
	if code != 0 {
		t.Fatalf("cert-renewal: exit %d: %s\n%+v", code, errOut, p)
	}
	caPEM := readHostFileIn(t, l, "boot-1", "/etc/kubernetes/pki/ca.crt")
	ca := firstCert(t, caPEM)
	// etcd's certificates come from etcd's CA, the same one as before.
	etcdCAPEM := readHostFileIn(t, l, "boot-1", "/etc/kubernetes/pki/etcd/ca.crt")
	if !bytes.Equal(etcdCAPEM, etcdCABefore) {
		t.Error("the renewal changed etcd's CA")
	}
	etcdCA := firstCert(t, etcdCAPEM)
	checkRenewed(t, endpoints, before, ca, etcdCA)
	if t.Failed() {
		t.Logf("the renewal that exited 0: %+v", p)
	}
	peer := firstCert(t, readHostFileIn(t, l, "boot-1", "/etc/kubernetes/pki/etcd/peer.crt"))
	if peer.SerialNumber.Cmp(filesBefore.SerialNumber) == 0 {
		t.Error("etcd's peer certificate on disk was not renewed")
	}
	if err := peer.CheckSignatureFrom(etcdCA); err != nil {
		t.Errorf("etcd's renewed peer certificate is not from etcd's CA: %v", err)
	}
	nodes, err := bootstrapped.client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("the cluster after renewal: %v", err)
	}
	for _, n := range nodes.Items {
		if !nodeIsReady(&n) {
			t.Errorf("%s not Ready after the renewal", n.Name)
		}
	}

	// Nothing is due right after a renewal: a second run changes nothing.
	renewed := servedCert(t, endpoints[0])
	p, code, errOut = runWaitInv(t, "cert-renewal", bootstrapped.inventory, "--set", "threshold=720h")
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("second cert-renewal: exit %d, %s: %s", code, p.State, errOut)
	}
	if again := servedCert(t, endpoints[0]); again.SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Errorf("the API server's certificate was renewed again though nothing was due")
	}

	// And it runs every day on a Temporal Schedule.
	out, errOut, code := kedge(t, "schedule", "cert-renewal", "--inventory", bootstrapped.inventory, "--every", "24h", "--paused", "--id", "cert-renewal/boot", "--output", "json")
	if code != 0 {
		t.Fatalf("kedge schedule: exit %d: %s %s", code, out, errOut)
	}
	h := world.client.ScheduleClient().GetHandle(t.Context(), "cert-renewal/boot")
	t.Cleanup(func() { _ = h.Delete(context.Background()) })
	d, err := h.Describe(t.Context())
	if err != nil || len(d.Schedule.Spec.Intervals) != 1 || d.Schedule.Spec.Intervals[0].Every != 24*time.Hour {
		t.Errorf("schedule: %+v %v", d, err)
	}
}

// checkRenewed checks each endpoint serves a newer certificate than it did
// before, issued by etcd's CA on etcd's client port (2379) and by the
// cluster CA elsewhere.
func checkRenewed(t *testing.T, endpoints []string, before map[string]*x509.Certificate, ca, etcdCA *x509.Certificate) {
	t.Helper()
	for _, ep := range endpoints {
		after := servedCert(t, ep)
		if !after.NotAfter.After(before[ep].NotAfter) || after.SerialNumber.Cmp(before[ep].SerialNumber) == 0 {
			t.Errorf("%s still serves serial %x ending %s", ep, after.SerialNumber, after.NotAfter)
		}
		want, name := ca, "the cluster CA"
		if strings.HasSuffix(ep, ":2379") {
			want, name = etcdCA, "etcd's CA"
		}
		if err := after.CheckSignatureFrom(want); err != nil {
			t.Errorf("%s serves a certificate not issued by %s: %v (issuer %s)", ep, name, err, after.Issuer)
		}
	}
}
