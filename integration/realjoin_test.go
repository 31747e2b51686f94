package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/images"
	"kedge.dev/kedge/integration/realnode"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// realKubeletTools skips the test where real kubelets cannot run, and
// returns the tools directory holding the kubelet.
func realKubeletTools(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real kubelet")
	}
	if why := realnode.Supported(); why != "" {
		t.Skip("real kubelets cannot run here: " + why)
	}
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tools, "kubelet")); err != nil {
		t.Skipf("no kubelet in %s (scripts/kube-tools.sh builds it)", tools)
	}
	return tools
}

// node-join and node-remove on a real kubelet, reached over SSH as core
// with sudo. The node starts bare: containerd, the machine's kubelet
// drop-in and the kubelet image, no pod network and no kubelet unit.
// node-join gives it everything else; the real kubelet joins through TLS
// bootstrap with the token Kedge made (never an admin credential), is
// Ready only once Kedge's bridge network is there, and runs a pod on it.
// node-remove drains that pod away, stops and disables the kubelet,
// deletes the Node and takes the kubelet's credentials off the host,
// leaving what the machine's own provisioning put there. Joined again, the
// node comes back.
func TestRealKubeletJoinAndRemove(t *testing.T) {
	realLane.join(t)
	tools := realKubeletTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	bin, err := images.KubeletBinary(ctx, tools, images.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	image := images.KubeletRef(images.KubeVersion)
	const name = "real-join-1"
	r := startRealSSHNode(ctx, t, realnode.Options{Name: name, NoPodNetwork: true}, realnode.KubeletImage{Ref: image, Binary: bin})
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: t.TempDir(), Host: r.node.HostIP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })

	const podCIDR = "10.244.0.0/16"
	inv := writeInventory(t, fmt.Sprintf(`apiVersion: kedge/v1
kind: Cluster
metadata:
  name: realjoin
kubernetes:
  kubeconfig: %s
  kubeletImage: %s
  clusterDNS: [10.96.0.10]
  podCIDR: %s
ssh:
  user: %s
  become: sudo
  identityFile: %s
  knownHostsFile: %s
workers:
  - name: %s
    address: %s
    labels: [node.kubernetes.io/pool=batch]
    taints: [dedicated=batch:NoSchedule]
`, cp.AdminKubeconfig, image, podCIDR, testhosts.User, r.lab.IdentityFile, r.lab.KnownHostsFile, name, r.node.NodeIP))

	start := time.Now()
	p, code, errOut := runWaitInv(t, "node-join", inv, "--set", "node="+name, "--set", "readyTimeout=3m")
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("node-join: exit %d: %s\n%+v%s", code, errOut, p, r.node.UnitLog(r.host, "kubelet"))
	}
	t.Logf("node-join of a real kubelet: %s", time.Since(start).Round(time.Millisecond))
	checkJoined(t, cp, r, image)

	// The node runs pods on the network Kedge gave it.
	subnet, err := nodefiles.NodeSubnet(podCIDR, 24, 0)
	if err != nil {
		t.Fatal(err)
	}
	pod := runPauseDeployment(t, cp, name)
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !subnet.Contains(ip) {
		t.Errorf("pod %s has IP %q, not from the node's share %s of the pod network", pod.Name, pod.Status.PodIP, subnet)
	}

	start = time.Now()
	p, code, errOut = runWaitInv(t, "node-remove", inv, "--set", "node="+name, "--set", "drainTimeout=2m")
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("node-remove: exit %d: %s\n%+v%s", code, errOut, p, r.node.UnitLog(r.host, "kubelet"))
	}
	t.Logf("node-remove of a real kubelet: %s", time.Since(start).Round(time.Millisecond))
	checkRemoved(ctx, t, cp, r, pod)

	t.Run("joined again", func(t *testing.T) {
		p, code, errOut := runWaitInv(t, "node-join", inv, "--set", "node="+name, "--set", "readyTimeout=3m")
		if code != 0 || p.State != workflows.StateSucceeded {
			t.Fatalf("node-join after node-remove: exit %d: %s\n%+v%s", code, errOut, p, r.node.UnitLog(r.host, "kubelet"))
		}
		checkJoined(t, cp, r, image)
	})
}

// checkJoined checks a node node-join joined: Ready at the image's
// version with the inventory's labels and taints; its kubelet holds a
// client certificate for system:node:NAME that the kubelet itself asked
// for and keeps (kubelet-client-current.pem), signed by the cluster CA;
// the join token is gone; the only pod network is Kedge's.
func checkJoined(t *testing.T, cp *controlplane.ControlPlane, r *realSSHNode, image string) {
	t.Helper()
	version := image[strings.LastIndex(image, ":")+1:]
	n := waitRealNode(t, cp, r, version, 30*time.Second)
	if n.Labels["node.kubernetes.io/pool"] != "batch" {
		t.Errorf("labels %v", n.Labels)
	}
	if _, ok := n.Labels[nodefiles.WorkerLabel]; !ok {
		t.Errorf("no %s label: %v", nodefiles.WorkerLabel, n.Labels)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool {
		return tt.Key == "dedicated" && tt.Value == "batch" && tt.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Reason != "KubeletReady" {
			t.Errorf("Ready condition reason %q", c.Reason)
		}
	}
	// The machine's drop-in reached the kubelet node-join started.
	if err := realnode.CheckEviction(t.Context(), cp.Client, r.node.Name); err != nil {
		t.Error(err)
	}
	// A link to the dated file, as the kubelet keeps it: read inside the
	// node.
	pemData, err := r.host.Exec(t.Context(), "cat", "/var/lib/kubelet/pki/kubelet-client-current.pem")
	if err != nil {
		t.Fatalf("kubelet client certificate: %v: %s", err, pemData)
	}
	checkKubeletClientCert(t, pemData, r.node.Name, cp.CAFile)
	if kc := r.file(t, nodefiles.KubeletKubeconfigPath); !strings.Contains(kc, "/var/lib/kubelet/pki/kubelet-client-current.pem") {
		t.Errorf("the kubelet's kubeconfig does not use the certificate it rotates:\n%s", kc)
	}
	if left := bootstrapTokens(t, cp); len(left) != 0 {
		t.Errorf("bootstrap tokens left after the join: %v", left)
	}
	entries, err := os.ReadDir(r.node.Path(nodefiles.CNIConfDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{filepath.Base(nodefiles.BridgeCNIConfigPath)}; !slices.Equal(names, want) {
		t.Errorf("%s holds %v, want %v", nodefiles.CNIConfDir, names, want)
	}
}

// runPauseDeployment runs one pod of the pause image on node (tolerating
// its taint) from a Deployment, so a drain has something to evict, and
// returns it once it runs.
func runPauseDeployment(t *testing.T, cp *controlplane.ControlPlane, node string) *corev1.Pod {
	t.Helper()
	labels := map[string]string{"app": "pause"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: node},
					Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "pause", Image: images.PauseRef(), ImagePullPolicy: corev1.PullNever,
					}},
				},
			},
		},
	}
	if _, err := cp.Client.AppsV1().Deployments("default").Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods, err := cp.Client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=pause"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pause pod running on %s after 2m: %+v", node, pods.Items)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkRemoved checks what node-remove left: no Node; the kubelet
// stopped and disabled; the evicted pod's containers stopped; the
// kubelet's credentials, the bootstrap kubeconfig and Kedge's network off
// the host; and the machine's own kubelet drop-in still there.
func checkRemoved(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, r *realSSHNode, pod *corev1.Pod) {
	t.Helper()
	if _, err := cp.Client.CoreV1().Nodes().Get(t.Context(), r.node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s after node-remove: %v, want NotFound", r.node.Name, err)
	}
	for _, c := range [][]string{{"is-active", "kubelet"}, {"is-enabled", "kubelet"}} {
		out, _ := r.host.Exec(t.Context(), "systemctl", c...)
		if got := strings.TrimSpace(string(out)); got == "active" || got == "enabled" {
			t.Errorf("systemctl %s: %s", strings.Join(c, " "), got)
		}
	}
	if _, err := cp.Client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s, evicted by the drain: %v, want NotFound", pod.Name, err)
	}
	out, err := r.node.Command(ctx, "ctr", "-a", realnode.ContainerdSocket, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr tasks ls: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if strings.Contains(line, "RUNNING") {
			t.Errorf("a container still runs on the removed node: %s", line)
		}
	}
	for _, p := range []string{"/var/lib/kubelet/pki", nodefiles.KubeletKubeconfigPath, nodefiles.BootstrapKubeconfigPath, nodefiles.BridgeCNIConfigPath} {
		if _, err := os.Stat(r.node.Path(p)); !os.IsNotExist(err) {
			t.Errorf("%s left on the removed node (%v)", p, err)
		}
	}
	if _, err := os.Stat(r.node.Path(realnode.MachineDropInPath)); err != nil {
		t.Errorf("the machine's own kubelet drop-in was removed: %v", err)
	}
}
