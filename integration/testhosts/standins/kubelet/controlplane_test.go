package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/controlplane"

	"kedge.dev/kedge/actions/render"
)

// bootstrapRBAC are the bindings that let kubelets join by TLS bootstrap:
// bootstrap tokens may ask for node client certificates, which the
// controller-manager then approves, and nodes may renew their own.
func bootstrapRBAC(ctx context.Context, cs kubernetes.Interface) error {
	for _, b := range []struct{ name, role, group string }{
		{"kubelet-bootstrap", "system:node-bootstrapper", "system:bootstrappers"},
		{"node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"},
		{"node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ClusterRoleBinding %s: %w", b.name, err)
		}
	}
	return nil
}

// kubeletConfig is the rendered kubelet config with its paths moved into
// dir and a serving pair named.
func kubeletConfig(t *testing.T, dir, caFile, tlsCert, tlsKey string) string {
	t.Helper()
	rendered, err := nodefiles.KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(rendered, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["staticPodPath"] = filepath.Join(dir, "etc/kubernetes/manifests")
	cfg["podLogsDir"] = filepath.Join(dir, "var/log/pods")
	cfg["authentication"].(map[string]any)["x509"] = map[string]any{"clientCAFile": caFile}
	if tlsCert != "" {
		cfg["tlsCertFile"], cfg["tlsPrivateKeyFile"] = tlsCert, tlsKey
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "etc/kubernetes/kubelet.yaml")
	writeFile(t, path, string(out), 0o644)
	return path
}

func TestWithAControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	cp, err := controlplane.Start(context.Background(), controlplane.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	t.Run("TLSBootstrapRegistrationAndServing", func(t *testing.T) { testTLSBootstrapRegistrationAndServing(t, cp) })
	t.Run("LabKubeconfig", func(t *testing.T) { testLabKubeconfig(t, cp) })
	t.Run("NotReadyUntilCNI", func(t *testing.T) { testNotReadyUntilCNI(t, cp) })
}

// testNotReadyUntilCNI: a node registers with the config's taints and
// every --node-labels, stays NotReady as the real kubelet says it while
// the CNI directory holds no valid network (its pods Pending, host-network
// ones aside), and becomes Ready soon after one appears.
func testNotReadyUntilCNI(t *testing.T, cp *controlplane.ControlPlane) {
	ctx := context.Background()
	dir := t.TempDir()
	kubeconfig, err := cp.EmbeddedKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "kubelet.conf"), string(kubeconfig), 0o600)
	config := filepath.Join(dir, "kubelet.yaml")
	writeFile(t, config, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
healthzPort: 0
registerWithTaints:
- key: node-role.kubernetes.io/controller
  effect: NoSchedule
`, 0o644)
	cniDir := filepath.Join(dir, "empty-net.d")
	writeFile(t, filepath.Join(cniDir, "README"), "no network yet\n", 0o644)
	s := newSim(t, dir, []string{"KEDGE_LAB_CNI_CONF_DIR=" + cniDir, "KEDGE_LAB_HEARTBEAT=500ms"},
		"--config="+config, "--kubeconfig="+filepath.Join(dir, "kubelet.conf"), "--hostname-override=cni-node-1",
		"--root-dir="+filepath.Join(dir, "kubelet"),
		"--node-labels=node.kubernetes.io/controller=true", "--node-labels=team=ml")
	s.start()
	node := func() (*corev1.Node, corev1.NodeCondition, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, "cni-node-1", metav1.GetOptions{})
		if err != nil {
			return nil, corev1.NodeCondition{}, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return n, c, nil
			}
		}
		return n, corev1.NodeCondition{}, errors.New("no Ready condition yet")
	}
	eventually(t, 20*time.Second, "node cni-node-1 registers NotReady", func() error {
		_, c, err := node()
		if err != nil {
			return err
		}
		if c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" || !strings.Contains(c.Message, "cni plugin not initialized") {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	n, _, _ := node()
	if n.Labels["node.kubernetes.io/controller"] != "true" || n.Labels["team"] != "ml" {
		t.Errorf("labels %v", n.Labels)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == "node-role.kubernetes.io/controller" && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("taints %v: not the config's registerWithTaints", n.Spec.Taints)
	}
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "on-pod-network", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "cni-node-1", Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "on-host-network", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "cni-node-1", HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}},
	} {
		if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cp.Client.CoreV1().Pods("default").Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		})
	}
	phase := func(name string) corev1.PodPhase {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return p.Status.Phase
	}
	eventually(t, 10*time.Second, "the host-network pod runs", func() error {
		if ph := phase("on-host-network"); ph != corev1.PodRunning {
			return fmt.Errorf("phase %q", ph)
		}
		return nil
	})
	// A config that does not parse is no network either.
	writeFile(t, filepath.Join(cniDir, "05-broken.conflist"), `{"name": "x", "plugins": [`, 0o644)
	time.Sleep(1500 * time.Millisecond)
	if _, c, _ := node(); c.Status != corev1.ConditionFalse || phase("on-pod-network") == corev1.PodRunning {
		t.Fatalf("Ready %s, pod %s without a valid network", c.Status, phase("on-pod-network"))
	}
	writeFile(t, filepath.Join(cniDir, "10-kedge-bridge.conflist"), testConflist, 0o644)
	eventually(t, 10*time.Second, "node cni-node-1 becomes Ready", func() error {
		_, c, err := node()
		if err != nil {
			return err
		}
		if c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready condition %+v", c)
		}
		if ph := phase("on-pod-network"); ph != corev1.PodRunning {
			return fmt.Errorf("pod phase %q", ph)
		}
		return nil
	})
}

// testLabKubeconfig runs the simulator as integration/lab does: a given
// kubeconfig, a node name, no config file.
func testLabKubeconfig(t *testing.T, cp *controlplane.ControlPlane) {
	ctx := context.Background()
	dir := t.TempDir()
	kubeconfig, err := cp.EmbeddedKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "kubelet.conf"), string(kubeconfig), 0o600)
	// --healthz-port=0: without a node IP, healthz would take 127.0.0.1:10248.
	s := newSim(t, dir, []string{"KEDGE_LAB_IMAGE=quay.io/poseidon/kubelet:v1.35.3"},
		"--kubeconfig="+filepath.Join(dir, "kubelet.conf"), "--hostname-override=lab-node-1", "--healthz-port=0")
	s.start()
	eventually(t, 20*time.Second, "node lab-node-1 is Ready at v1.35.3", func() error {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, "lab-node-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Status.NodeInfo.KubeletVersion != "v1.35.3" {
			return fmt.Errorf("version %q", n.Status.NodeInfo.KubeletVersion)
		}
		return nil
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "scheduled", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "lab-node-1", Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the scheduled pod runs", func() error {
		p, err := cp.Client.CoreV1().Pods("default").Get(ctx, "scheduled", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if err := cp.Client.CoreV1().Pods("default").Delete(ctx, "scheduled", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the deleted pod is gone", func() error {
		if _, err := cp.Client.CoreV1().Pods("default").Get(ctx, "scheduled", metav1.GetOptions{}); err == nil {
			return errors.New("still there")
		}
		return nil
	})
}

func testTLSBootstrapRegistrationAndServing(t *testing.T, cp *controlplane.ControlPlane) {
	ctx := context.Background()
	if err := bootstrapRBAC(ctx, cp.Client); err != nil {
		t.Fatal(err)
	}
	token, err := nodefiles.NewBootstrapToken(10*time.Minute, time.Now(), "kubelet simulator test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Secrets("kube-system").Create(ctx, token.Secret(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The node's files, laid out as the runbooks lay them out under dir.
	dir := t.TempDir()
	t.Cleanup(func() { killStaticPods(filepath.Join(dir, "var/lib/kubelet")) })
	caPEM, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	bootKubeconfig, err := nodefiles.Kubeconfig(render.KubeconfigInput{ClusterName: "sim", Server: cp.Server, CACert: string(caPEM),
		User: "kubelet-bootstrap", Token: token.Token})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "etc/kubernetes/bootstrap-kubeconfig"), string(bootKubeconfig), 0o600)
	servingCert, servingKey, err := certutil.GenerateSelfSignedCertKey("sim-node-1", []net.IP{net.ParseIP(bootstrapNodeIP)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "etc/kubernetes/pki/kubelet-serving.crt"), filepath.Join(dir, "etc/kubernetes/pki/kubelet-serving.key")
	writeFile(t, certFile, string(servingCert), 0o644)
	writeFile(t, keyFile, string(servingKey), 0o600)
	config := kubeletConfig(t, dir, cp.CAFile, certFile, keyFile)
	writeFile(t, filepath.Join(dir, "etc/kubernetes/manifests/probe.yaml"), `apiVersion: v1
kind: Pod
metadata: {name: probe, namespace: kube-system, labels: {component: probe}}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: probe
    image: lab.example/sh:1
    command: [sh, -c, "echo hello from $(NODE); exec sleep 300"]
    env:
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
`, 0o644)
	images := writeImages(t, "lab.example/sh /bin/sh")

	kubeletDir := filepath.Join(dir, "var/lib/kubelet")
	kubeconfig := filepath.Join(kubeletDir, "kubeconfig")
	s := newSim(t, dir, []string{"KEDGE_LAB_IMAGE=quay.io/poseidon/kubelet:v1.35.3", "KEDGE_LAB_IMAGES=" + images},
		"--config="+config,
		"--kubeconfig="+kubeconfig,
		"--bootstrap-kubeconfig="+filepath.Join(dir, "etc/kubernetes/bootstrap-kubeconfig"),
		"--hostname-override=sim-node-1",
		"--node-ip="+bootstrapNodeIP,
		"--node-labels=role=special,node.kubernetes.io/pool=gpu",
		"--register-with-taints=role=special:NoSchedule,dedicated:NoExecute",
		"--root-dir="+kubeletDir,
		"--container-runtime-endpoint", "unix:///run/containerd/containerd.sock", "--v=2",
	)
	s.start()

	// The Node registers Ready, with the labels, taints and address given.
	var node *corev1.Node
	eventually(t, 30*time.Second, "node sim-node-1 is Ready", func() error {
		node, err = cp.Client.CoreV1().Nodes().Get(ctx, "sim-node-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not Ready")
	})
	if node.Labels["role"] != "special" || node.Labels["node.kubernetes.io/pool"] != "gpu" || node.Labels["kubernetes.io/hostname"] != "sim-node-1" {
		t.Errorf("labels %v", node.Labels)
	}
	wantTaints := []corev1.Taint{{Key: "role", Value: "special", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}}
	for _, w := range wantTaints {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&w) && t.Value == w.Value }) {
			t.Errorf("taints %v lack %v", node.Spec.Taints, w)
		}
	}
	if !slices.Contains(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: bootstrapNodeIP}) {
		t.Errorf("addresses %v", node.Status.Addresses)
	}
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 || node.Status.NodeInfo.KubeletVersion != "v1.35.3" {
		t.Errorf("endpoint %d version %s", node.Status.DaemonEndpoints.KubeletEndpoint.Port, node.Status.NodeInfo.KubeletVersion)
	}

	// It joined by TLS bootstrap: the token asked, the controller-manager
	// approved, the signer issued.
	csrs := bootstrapCSRs(ctx, t, cp.Client, token.ID)
	if len(csrs) != 1 {
		t.Fatalf("%d CSRs by system:bootstrap:%s, want 1", len(csrs), token.ID)
	}
	csr := csrs[0]
	approved := slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue
	})
	if !approved || len(csr.Status.Certificate) == 0 || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName ||
		!strings.HasPrefix(csr.Name, "node-csr-") {
		t.Errorf("CSR %s: approved %t, issued %t, signer %s", csr.Name, approved, len(csr.Status.Certificate) > 0, csr.Spec.SignerName)
	}
	pemPath := filepath.Join(kubeletDir, "pki", "kubelet-client-current.pem")
	if fi, err := os.Stat(pemPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, mode %v", pemPath, err, fi.Mode())
	}
	pem, err := os.ReadFile(pemPath)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(pem)
	if err != nil {
		t.Fatal(err)
	}
	if certs[0].Subject.CommonName != "system:node:sim-node-1" || !slices.Equal(certs[0].Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("client certificate subject %s", certs[0].Subject)
	}
	if !bytes.Contains(pem, []byte("PRIVATE KEY")) {
		t.Error("the pair file holds no key")
	}
	written, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	wctx := written.Contexts[written.CurrentContext]
	if written.Clusters[wctx.Cluster].Server != cp.Server || written.AuthInfos[wctx.AuthInfo].ClientCertificate != pemPath ||
		written.AuthInfos[wctx.AuthInfo].ClientKey != pemPath {
		t.Errorf("written kubeconfig: server %s, user %+v", written.Clusters[wctx.Cluster].Server, written.AuthInfos[wctx.AuthInfo])
	}
	if out := s.output(); strings.Contains(out, token.TokenSecret) || strings.Contains(out, "BEGIN") {
		t.Error("the simulator printed the token or a key")
	}

	// :10250 serves the configured certificate, to clients of the cluster
	// CA; /healthz on http is on the node IP.
	client := kubeletClient(t, cp)
	conn, err := tls.Dial("tcp", net.JoinHostPort(bootstrapNodeIP, "10250"), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	configured, _ := certutil.ParseCertsPEM(servingCert)
	if !served.Equal(configured[0]) {
		t.Errorf("10250 serves %s (until %s), not the configured certificate", served.Subject, served.NotAfter)
	}
	if code, _ := get(t, client, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with a client certificate: %d", code)
	}
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code, _ := get(t, anonymous, "/healthz"); code != http.StatusUnauthorized {
		t.Errorf("/healthz without a client certificate: %d, want 401 (anonymous auth is off)", code)
	}
	if resp, err := http.Get("http://" + net.JoinHostPort(bootstrapNodeIP, "10248") + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("http healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The static pod runs and has its mirror pod, owned by the Node.
	var mirror *corev1.Pod
	eventually(t, 20*time.Second, "mirror pod kube-system/probe-sim-node-1 is Running and Ready", func() error {
		mirror, err = cp.Client.CoreV1().Pods("kube-system").Get(ctx, "probe-sim-node-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range mirror.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && mirror.Status.Phase == corev1.PodRunning {
				return nil
			}
		}
		return fmt.Errorf("phase %s", mirror.Status.Phase)
	})
	if mirror.Annotations[corev1.MirrorPodAnnotationKey] == "" || len(mirror.OwnerReferences) != 1 ||
		mirror.OwnerReferences[0].Kind != "Node" || mirror.OwnerReferences[0].UID != node.UID || mirror.Status.PodIP != bootstrapNodeIP {
		t.Errorf("mirror pod: annotations %v, owners %v, pod IP %s", mirror.Annotations, mirror.OwnerReferences, mirror.Status.PodIP)
	}
	if _, logs := get(t, client, "/containerLogs/kube-system/probe-sim-node-1/probe?tailLines=10"); logs != "hello from sim-node-1\n" {
		t.Errorf("container logs %q", logs)
	}
	probe := readStates(filepath.Join(kubeletDir, staticPodStateDir))

	// A restarted kubelet keeps its credentials and its static pod.
	s.stop()
	s.start()
	s.waitOutput("using kubeconfig "+kubeconfig, 1, 20*time.Second)
	s.waitOutput("adopted container probe (pid", 1, 20*time.Second)
	if again := readStates(filepath.Join(kubeletDir, staticPodStateDir)); len(again) != 1 || again[0].Containers[0].PID != probe[0].Containers[0].PID {
		t.Errorf("static pod after a kubelet restart: %+v, before: %+v", again, probe)
	}
	if n := len(bootstrapCSRs(ctx, t, cp.Client, token.ID)); n != 1 {
		t.Errorf("a restarted kubelet with a valid kubeconfig asked again: %d CSRs", n)
	}
}

func bootstrapCSRs(ctx context.Context, t *testing.T, cs kubernetes.Interface, tokenID string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []certificatesv1.CertificateSigningRequest
	for _, c := range list.Items {
		if c.Spec.Username == "system:bootstrap:"+tokenID {
			mine = append(mine, c)
		}
	}
	return mine
}

// kubeletClient is an HTTPS client with the control plane's admin
// certificate, as the API server calls kubelets with a certificate of the
// cluster CA.
func kubeletClient(t *testing.T, cp *controlplane.ControlPlane) *http.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}}
}

func get(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	resp, err := c.Get("https://" + net.JoinHostPort(bootstrapNodeIP, "10250") + path)
	if err != nil {
		t.Errorf("GET %s: %v", path, err)
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
