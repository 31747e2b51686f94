package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
)

// joinImage is the kubelet image node-join gives new nodes; its tag is the
// version the simulated kubelet reports.
const joinImage = "quay.io/poseidon/kubelet:v1.35.4"

var joinWorld struct {
	once sync.Once
	lab  *testhosts.Lab
	err  error
}

// joinLab starts (once) two bare hosts, never joined to any cluster: a
// container runtime stand-in that maps the kubelet image to the kubelet
// simulator is all they have.
func joinLab(t *testing.T) *testhosts.Lab {
	t.Helper()
	joinWorld.once.Do(func() {
		dir := filepath.Join(world.dir, "join")
		l, err := testhosts.Start(context.Background(), testhosts.Options{Count: 2, Names: []string{"join-1", "join-2"},
			BaseIP: "127.0.24.", Dir: filepath.Join(dir, "hosts")})
		if err != nil {
			joinWorld.err = err
			return
		}
		joinWorld.lab = l
		atWorldEnd(func() { _ = l.Close() })
		for _, h := range l.Hosts {
			if err := h.WriteFile("/etc/kedge-lab/images", []byte("quay.io/poseidon/kubelet /usr/local/sbin/kubelet-sim\n"), 0o644); err != nil {
				joinWorld.err = err
				return
			}
		}
	})
	if joinWorld.err != nil {
		t.Fatal(joinWorld.err)
	}
	return joinWorld.lab
}

// joinInventory writes an inventory of the join lab on the test world's
// control plane: join-1 a worker with labels and taints; extra is added
// under the first node (e.g. labels on a controller).
func joinInventory(t *testing.T, cp *controlplane.ControlPlane, l *testhosts.Lab, controllerExtra string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: kedge/v1\nkind: Cluster\nmetadata:\n  name: join\n")
	b.WriteString("ssh:\n  user: core\n  become: sudo\n  identityFile: " + l.IdentityFile + "\n  knownHostsFile: " + l.KnownHostsFile + "\n")
	b.WriteString("kubernetes:\n  kubeconfig: " + cp.AdminKubeconfig + "\n  kubeletImage: " + joinImage + "\n  clusterDNS: [10.96.0.10]\n")
	h1, h2 := l.Hosts[0], l.Hosts[1]
	b.WriteString("controllers:\n  - name: join-c\n    address: " + h2.Address + "\n" + controllerExtra)
	b.WriteString("workers:\n  - name: " + h1.Name + "\n    address: " + h1.Address + "\n")
	b.WriteString("    labels: [node.kubernetes.io/pool=gpu, team=ml]\n    taints: [dedicated=gpu:NoSchedule]\n")
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNodeJoinWithTLSBootstrap(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	l := joinLab(t)
	inv := joinInventory(t, cp, l, "")
	ctx := t.Context()

	p, code, errOut := runWaitInv(t, "node-join", inv, "--set", "node=join-1")
	if code != 0 {
		t.Fatalf("node-join: exit %d: %s\n%+v", code, errOut, p)
	}

	n, err := cp.Client.CoreV1().Nodes().Get(ctx, "join-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeIsReady(n) || n.Status.NodeInfo.KubeletVersion != "v1.35.4" {
		t.Errorf("join-1: ready=%t kubelet %q", nodeIsReady(n), n.Status.NodeInfo.KubeletVersion)
	}
	if n.Labels["node.kubernetes.io/pool"] != "gpu" || n.Labels["team"] != "ml" {
		t.Errorf("labels %v", n.Labels)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool {
		return tt.Key == "dedicated" && tt.Value == "gpu" && tt.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("taints %v", n.Spec.Taints)
	}

	// The client certificate came through a CSR the bootstrap token made,
	// approved and signed by the controller-manager.
	csrs, err := cp.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tokenID string
	for _, c := range csrs.Items {
		id, ok := strings.CutPrefix(c.Spec.Username, "system:bootstrap:")
		if !ok || c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue
		}
		block, _ := pem.Decode(c.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil || req.Subject.CommonName != "system:node:join-1" {
			continue
		}
		approved := slices.ContainsFunc(c.Status.Conditions, func(cond certificatesv1.CertificateSigningRequestCondition) bool {
			return cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue
		})
		if !approved || len(c.Status.Certificate) == 0 {
			t.Errorf("CSR %s of %s: approved=%t, issued=%t", c.Name, c.Spec.Username, approved, len(c.Status.Certificate) > 0)
		}
		tokenID = id
	}
	if tokenID == "" {
		t.Fatalf("no kubelet client CSR from a bootstrap token for join-1 among %d CSRs", len(csrs.Items))
	}
	// A symlink to the dated file, as the real kubelet keeps it: read it
	// from inside the host.
	pemData, err := hostIn(l, "join-1").Exec(ctx, "cat", "/var/lib/kubelet/pki/kubelet-client-current.pem")
	if err != nil {
		t.Fatalf("kubelet client certificate: %v: %s", err, pemData)
	}
	checkKubeletClientCert(t, pemData, "join-1", cp.CAFile)

	// The token was for this join only.
	_, err = cp.Client.CoreV1().Secrets("kube-system").Get(ctx, bootstraputil.BootstrapTokenSecretName(tokenID), metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("bootstrap token Secret %s: %v, want NotFound", tokenID, err)
	}
	if s := step(t, p, "revoke-token"); s.State != "succeeded" {
		t.Errorf("revoke-token %+v", s)
	}
	// The bootstrap kubeconfig holds a credential: only root reads it.
	out, err := hostIn(l, "join-1").Exec(ctx, "stat", "-c", "%a", "/etc/kubernetes/bootstrap-kubeconfig")
	if err != nil || strings.TrimSpace(string(out)) != "600" {
		t.Errorf("bootstrap-kubeconfig mode %q (%v)", out, err)
	}
}

// A failed join revokes its token too: here the kubelet never comes up
// (its image maps to nothing), so wait-node times out.
func TestNodeJoinFailureRevokesTheToken(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	l := joinLab(t)
	inv := joinInventory(t, cp, l, "")
	ctx := t.Context()
	before := bootstrapTokens(t, cp)
	_, code, _ := runWaitInv(t, "node-join", inv, "--set", "node=join-c",
		"--set", "image=quay.io/other/kubelet:v1.35.4", "--set", "readyTimeout=3s")
	if code == 0 {
		t.Fatal("node-join of a kubelet that never starts succeeded")
	}
	if after := bootstrapTokens(t, cp); len(after) != len(before) {
		t.Errorf("bootstrap tokens before %v, after the failed join %v", before, after)
	}
	out, _ := hostIn(l, "join-2").Exec(ctx, "systemctl", "is-active", "kubelet")
	if got := strings.TrimSpace(string(out)); got == "active" {
		t.Errorf("kubelet left running after the failed join")
	}
}

// Labels and taints are for workers: an inventory giving them to a
// controller is refused before anything starts, naming file, line and
// field.
func TestNodeJoinRejectsLabelsOnAController(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	l := joinLab(t)
	inv := joinInventory(t, cp, l, "    labels: [team=ml]\n")
	_, errOut, code := kedge(t, "run", "node-join", "--inventory", inv, "--set", "node=join-c")
	if code == 0 || !strings.Contains(errOut, inv+":17:") || !strings.Contains(errOut, "labels are only allowed on workers") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func bootstrapTokens(t *testing.T, cp *controlplane.ControlPlane) []string {
	t.Helper()
	list, err := cp.Client.CoreV1().Secrets("kube-system").List(t.Context(), metav1.ListOptions{FieldSelector: "type=bootstrap.kubernetes.io/token"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

func hostIn(l *testhosts.Lab, name string) *testhosts.Host {
	for _, h := range l.Hosts {
		if h.Name == name {
			return h
		}
	}
	panic("no host " + name)
}

func readHostFileIn(t *testing.T, l *testhosts.Lab, h, path string) []byte {
	t.Helper()
	data, err := hostIn(l, h).ReadFile(path)
	if err != nil {
		t.Fatalf("read %s on %s: %v", path, h, err)
	}
	return data
}

func firstCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			t.Fatal("no certificate in the PEM data")
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

// checkKubeletClientCert checks a kubelet's client certificate is for
// system:node:NODE in system:nodes, signed by the CA in caFile.
func checkKubeletClientCert(t *testing.T, pemData []byte, node, caFile string) {
	t.Helper()
	cert := firstCert(t, pemData)
	if cert.Subject.CommonName != "system:node:"+node || !slices.Contains(cert.Subject.Organization, "system:nodes") {
		t.Errorf("kubelet client certificate subject %v", cert.Subject)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(firstCert(t, caPEM)); err != nil {
		t.Errorf("kubelet client certificate not signed by the cluster CA: %v", err)
	}
}
