package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/integration/images"
	"kedge.dev/kedge/integration/realnode"
)

// bootstrap and cert-renewal on real kubelets: three bare nodes (their
// own namespaces, containerd, no pod network, no kubelet unit) reached
// over SSH as core with sudo, routed to each other through the machine.
// bootstrap makes the cluster's CAs in Vault, gives the controller its
// PKI, kubeconfigs and static pods, which its real kubelet runs in
// containerd from the control-plane images (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler), and joins the workers with TLS
// bootstrap against that API server; every node is Ready once Kedge's pod
// network is on it. cert-renewal with everything due then renews every
// served certificate from the same CAs while the cluster keeps working.
func TestRealKubeletBootstrapAndCertRenewal(t *testing.T) {
	realLane.join(t)
	tools := realKubeletTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	rc := sharedRealCluster(t, tools)
	nodes, ctl, cs := rc.nodes, rc.ctl, rc.client
	checkRealCluster(t, cs, nodes)

	// The control plane is the controller's static pods, run by its
	// containerd: their mirror pods are Running on the controller.
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		var pod *corev1.Pod
		var err error
		deadline := time.Now().Add(time.Minute)
		for {
			pod, err = cs.CoreV1().Pods("kube-system").Get(ctx, c+"-"+ctl.node.Name, metav1.GetOptions{})
			if err == nil && pod.Status.Phase == corev1.PodRunning || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("mirror pod of %s: %v", c, err)
			continue
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Spec.Containers[0].Image != images.ControlPlaneRef(c) {
			t.Errorf("%s: %s, image %s", pod.Name, pod.Status.Phase, pod.Spec.Containers[0].Image)
		}
	}
	out, err := ctl.node.Command(ctx, "ctr", "-a", realnode.ContainerdSocket, "-n", "k8s.io", "containers", "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr containers ls: %v: %s", err, out)
	}
	for _, c := range []string{"etcd", "kube-apiserver"} {
		if !strings.Contains(string(out), images.ControlPlaneRef(c)) {
			t.Errorf("no %s container in the controller's containerd:\n%s", c, out)
		}
	}

	t.Run("kube-proxy makes Services work on every node", func(t *testing.T) {
		checkKubeProxy(ctx, t, cs, nodes)
	})

	t.Run("cert-renewal", func(t *testing.T) {
		// Every certificate due (5 years), not the 10-year CA.
		_, r := renewedRealCluster(t, tools)
		t.Logf("cert-renewal of every certificate on real kubelets: %s", r.took.Round(time.Millisecond))
		caPEM := []byte(ctl.file(t, "/etc/kubernetes/pki/ca.crt"))
		etcdCAPEM := []byte(ctl.file(t, "/etc/kubernetes/pki/etcd/ca.crt"))
		if !bytes.Equal(caPEM, r.caBefore) || !bytes.Equal(etcdCAPEM, r.etcdCABefore) {
			t.Error("the renewal changed the cluster CA or etcd's CA")
		}
		// The run ends with the control plane of the renewal up: the
		// API server answers at once, and every static pod running is the
		// one rendered for the renewed certificates (their serial on the
		// manifests), not the pod from before it, which the kubelet had
		// yet to restart when the run ended on a busy machine.
		checkRenewed(t, r.endpoints, r.before, firstCert(t, caPEM), firstCert(t, etcdCAPEM))
		checkRenewedPods(t, cs, ctl.node.Name, servedCert(t, r.endpoints[0]))
		checkRealCluster(t, cs, nodes)
	})
}

// checkRealCluster checks every node is Ready, its real kubelet at
// images.KubeVersion with the test machine's eviction thresholds
// (realnode.CheckEviction), and the controller carries its role's label
// and taint.
func checkRealCluster(t *testing.T, cs kubernetes.Interface, nodes []*realSSHNode) {
	t.Helper()
	for i, r := range nodes {
		var n *corev1.Node
		var err error
		deadline := time.Now().Add(time.Minute)
		for {
			n, err = cs.CoreV1().Nodes().Get(t.Context(), r.node.Name, metav1.GetOptions{})
			if err == nil && nodeIsReady(n) || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("node %s: %v", r.node.Name, err)
			continue
		}
		if !nodeIsReady(n) || n.Status.NodeInfo.KubeletVersion != images.KubeVersion {
			t.Errorf("node %s: ready %v, kubelet %q", n.Name, nodeIsReady(n), n.Status.NodeInfo.KubeletVersion)
		}
		_, controller := n.Labels["node-role.kubernetes.io/controller"]
		if (i == 0) != controller {
			t.Errorf("node %s: labels %v", n.Name, n.Labels)
		}
		// The machine's drop-in reached the kubelet bootstrap started.
		if err := realnode.CheckEviction(t.Context(), cs, n.Name); err != nil {
			t.Error(err)
		}
	}
}

// checkKubeProxy checks bootstrap's kube-proxy: its DaemonSet has a ready
// pod on every node, and from inside each node the kubernetes Service's
// ClusterIP leads to the API server (kube-proxy's rules in the node's
// network namespace, nothing else, make that address answer).
func checkKubeProxy(ctx context.Context, t *testing.T, cs kubernetes.Interface, nodes []*realSSHNode) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err == nil && ds.Status.NumberReady == int32(len(nodes)) {
			break
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, n := range nodes {
				files, _ := filepath.Glob(n.node.Path("/var/log/pods/kube-system_kube-proxy-*/kube-proxy/*.log"))
				for _, f := range files {
					b, _ := os.ReadFile(f)
					fmt.Fprintf(&logs, "\n%s %s:\n%s", n.node.Name, filepath.Base(f), tail(string(b), 1500))
				}
			}
			ready := int32(-1)
			if ds != nil {
				ready = ds.Status.NumberReady
			}
			t.Fatalf("kube-proxy ready on %d of %d nodes after 2m (%v)%s", ready, len(nodes), err, logs.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := servedCert(t, net.JoinHostPort(nodes[0].node.NodeIP, "6443"))
	for _, n := range nodes {
		addr := net.JoinHostPort(svc.Spec.ClusterIP, "443")
		var conn net.Conn
		deadline := time.Now().Add(30 * time.Second)
		for {
			// Each attempt short and on a new port: a SYN sent before
			// kube-proxy's rules were in place has a conntrack entry
			// without the translation, which its retransmits keep.
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			conn, err = n.node.DialContext(dctx, "tcp", addr)
			cancel()
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("%s: dial the kubernetes Service at %s: %v", n.node.Name, addr, err)
			continue
		}
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true}) // compared below with what the API server serves
		err = tc.HandshakeContext(ctx)
		if err == nil && !tc.ConnectionState().PeerCertificates[0].Equal(want) {
			err = fmt.Errorf("the Service answered with %s, not the API server's certificate", tc.ConnectionState().PeerCertificates[0].Subject)
		}
		tc.Close()
		if err != nil {
			t.Errorf("%s: the kubernetes Service %s: %v", n.node.Name, addr, err)
		}
	}
}

// checkRenewedPods checks the controller's static pods run, each the pod
// rendered for the API server certificate served (layout's certificates
// annotation carries its serial, as Vault writes it).
func checkRenewedPods(t *testing.T, cs kubernetes.Interface, node string, served *x509.Certificate) {
	t.Helper()
	var serial []string
	for _, b := range served.SerialNumber.Bytes() {
		serial = append(serial, fmt.Sprintf("%02x", b))
	}
	want := strings.Join(serial, ":")
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		pod, err := cs.CoreV1().Pods("kube-system").Get(t.Context(), c+"-"+node, metav1.GetOptions{})
		if err != nil {
			t.Errorf("mirror pod of %s: %v", c, err)
			continue
		}
		if got := pod.Annotations[render.CertificatesAnnotation]; got != want {
			t.Errorf("%s runs the pod for certificates %q, not the renewal's %q", pod.Name, got, want)
		}
		for _, st := range pod.Status.ContainerStatuses {
			if st.State.Running == nil {
				t.Errorf("%s: container %s not running: %+v", pod.Name, st.Name, st.State)
			}
		}
	}
}
