package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/images"
	"kedge.dev/kedge/integration/realnode"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// realSSHNode is a real node (integration/realnode: its own namespaces,
// containerd and a real kubelet) that is also an SSH test host: Kedge
// reaches it at its node IP as core with sudo, like any other host.
type realSSHNode struct {
	node    *realnode.Node
	host    *testhosts.Host
	runtime string         // docker or podman: the unit's container runtime
	lab     *testhosts.Lab // the host's client key and known_hosts
}

// startRealSSHNode starts a real node (o.Name; o.Dir a temporary
// directory if not given) with an sshd on its node IP, containerd with the
// pause image, and the kubelet images given (reference to kubelet binary)
// in the host's image store. Everything is stopped and put back when the
// test ends, failed or not.
func startRealSSHNode(ctx context.Context, t *testing.T, o realnode.Options, kubelets ...realnode.KubeletImage) *realSSHNode {
	t.Helper()
	return startRealSSHNodes(ctx, t, []realnode.Options{o}, kubelets...)[0]
}

// startRealSSHNodes starts real nodes as startRealSSHNode does, one for
// each of opts, reached with the same client key and known_hosts file.
func startRealSSHNodes(ctx context.Context, t testing.TB, opts []realnode.Options, kubelets ...realnode.KubeletImage) []*realSSHNode {
	t.Helper()
	var nodes []*realnode.Node
	var names, addrs []string
	for _, o := range opts {
		if o.Dir == "" {
			o.Dir = t.TempDir()
		}
		n := realnode.New(t, o)
		if err := n.StartRuntime(ctx); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		names, addrs = append(names, n.Name), append(addrs, n.NodeIP)
	}
	l, err := testhosts.Prepare(testhosts.Options{Count: len(nodes), Names: names, Addresses: addrs, Dir: filepath.Join(t.TempDir(), "hosts"), RealContainerd: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var out []*realSSHNode
	for i, n := range nodes {
		h := l.Hosts[i]
		if err := n.StartSSH(ctx, h); err != nil {
			t.Fatal(err)
		}
		if err := realnode.SetKubeletImages(h, kubelets...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			switch {
			case t.Failed():
				t.Logf("%s%s", n.Name, n.UnitLog(h, "kubelet"))
			case os.Getenv("KEDGE_REALNODE_LOGS") != "":
				// The kubelets' errors and warnings, to see what the
				// node lacks.
				b, _ := h.ReadFile("/var/log/units/kubelet.service.log")
				for _, line := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(line, "E") || strings.HasPrefix(line, "W") {
						t.Log(line)
					}
				}
			}
		})
		out = append(out, &realSSHNode{node: n, host: h, lab: l, runtime: nodefiles.RuntimeDocker})
	}
	return out
}

// inventory names the node as the cluster's only worker, at its node IP.
func (r *realSSHNode) inventory(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	return writeInventory(t, fmt.Sprintf(`apiVersion: kedge/v1
kind: Cluster
metadata:
  name: realkubelet
kubernetes:
  kubeconfig: %s
ssh:
  user: %s
  become: sudo
  identityFile: %s
  knownHostsFile: %s
workers:
  - name: %s
    address: %s
    port: 22
`, cp.AdminKubeconfig, testhosts.User, r.lab.IdentityFile, r.lab.KnownHostsFile, r.node.Name, r.node.NodeIP))
}

func (r *realSSHNode) file(t *testing.T, path string) string {
	t.Helper()
	b, err := r.host.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s on %s: %v", path, r.node.Name, err)
	}
	return string(b)
}

func (r *realSSHNode) kubeletEnvironment(t *testing.T) string {
	t.Helper()
	out, err := r.host.Exec(t.Context(), "systemctl", "show", "-p", "Environment", "kubelet")
	if err != nil {
		t.Fatalf("systemctl show on %s: %v", r.node.Name, err)
	}
	return strings.TrimSpace(string(out))
}

// waitRealNode waits until the Node is Ready and its kubelet reports
// version, and returns it.
func waitRealNode(t *testing.T, cp *controlplane.ControlPlane, r *realSSHNode, version string, timeout time.Duration) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	var err error
	deadline := time.Now().Add(timeout)
	for {
		n, err = cp.Client.CoreV1().Nodes().Get(t.Context(), r.node.Name, metav1.GetOptions{})
		if err == nil && nodeIsReady(n) && n.Status.NodeInfo.KubeletVersion == version {
			return n
		}
		if time.Now().After(deadline) {
			got := "not registered"
			if err == nil {
				got = fmt.Sprintf("kubelet %q, ready %v", n.Status.NodeInfo.KubeletVersion, nodeIsReady(n))
			}
			t.Fatalf("node %s not Ready at %s after %s (%s)%s", r.node.Name, version, timeout, got, r.node.UnitLog(r.host, "kubelet"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// The built-in kubelet-image-swap-node on a REAL kubelet: Kedge logs in to
// the node over SSH as core with sudo, cordons and drains it, writes the
// KUBELET_IMAGE drop-in, restarts kubelet.service (Kedge's rendered unit,
// run by the systemctl stand-in through the docker stand-in, whose image
// store maps each tag to a real kubelet binary) and waits until the
// running kubelet reports the new version in the Node; then it uncordons.
// A swap to an image whose kubelet still reports the old version fails at
// the wait and is undone.
func TestRealKubeletImageSwap(t *testing.T) {
	realLane.join(t)
	tools := realKubeletTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	oldBin, err := images.KubeletBinary(ctx, tools, images.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	newBin, err := images.KubeletBinary(ctx, tools, images.SwapVersion)
	if err != nil {
		t.Fatal(err)
	}
	oldImage, newImage := images.KubeletRef(images.KubeVersion), images.KubeletRef(images.SwapVersion)
	// Tagged as a newer version, but its kubelet is the old one: the
	// version to wait for is the kubelet's own, not the tag's.
	staleImage := images.KubeletRef(images.KubeVersion + "-kedge.2")

	start := time.Now()
	r := startRealSSHNode(ctx, t, realnode.Options{Name: "real-swap-1"},
		realnode.KubeletImage{Ref: oldImage, Binary: oldBin},
		realnode.KubeletImage{Ref: newImage, Binary: newBin},
		realnode.KubeletImage{Ref: staleImage, Binary: oldBin})
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: t.TempDir(), Host: r.node.HostIP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	t.Logf("node namespaces, containerd, sshd and control plane: %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	cluster := realnode.Cluster{Server: cp.Server, CAFile: cp.CAFile, CAKeyFile: cp.CAKeyFile}
	if err := r.node.InstallKubelet(ctx, r.host, cluster, realnode.UnitInput{Runtime: nodefiles.RuntimeDocker, Image: oldImage}); err != nil {
		t.Fatal(err)
	}
	waitRealNode(t, cp, r, images.KubeVersion, 2*time.Minute)
	t.Logf("kubelet.service start to Ready at %s: %s", images.KubeVersion, time.Since(start).Round(time.Millisecond))
	inv := r.inventory(t, cp)

	start = time.Now()
	p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", inv,
		"--set", "node="+r.node.Name, "--set", "image="+newImage, "--set", "readyTimeout=2m")
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("swap failed: exit %d: %s\n%+v%s", code, errOut, p, r.node.UnitLog(r.host, "kubelet"))
	}
	t.Logf("kubelet-image-swap-node on a real kubelet: %s", time.Since(start).Round(time.Millisecond))
	checkSwapped(t, cp, r, newImage, images.SwapVersion)

	t.Run("an image tagged newer than its kubelet: the swap waits for what the kubelet reports", func(t *testing.T) {
		start := time.Now()
		p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", inv,
			"--set", "node="+r.node.Name, "--set", "image="+staleImage, "--set", "readyTimeout=2m")
		t.Logf("swap to %s: %s", staleImage, time.Since(start).Round(time.Millisecond))
		if code != 0 || p.State != workflows.StateSucceeded {
			t.Fatalf("swap to %s failed: exit %d: %s\n%+v", staleImage, code, errOut, p)
		}
		pull := step(t, p, "pull")
		if pull.State != workflows.StateSucceeded {
			t.Errorf("pull step: %+v", pull)
		}
		checkSwapped(t, cp, r, staleImage, images.KubeVersion)
	})

	t.Run("with podman as on Fedora CoreOS", func(t *testing.T) {
		start := time.Now()
		r2 := startRealSSHNode(ctx, t, realnode.Options{Name: "real-swap-2"},
			realnode.KubeletImage{Ref: oldImage, Binary: oldBin},
			realnode.KubeletImage{Ref: newImage, Binary: newBin})
		r2.runtime = nodefiles.RuntimePodman
		if err := r2.node.InstallKubelet(ctx, r2.host, cluster, realnode.UnitInput{Runtime: nodefiles.RuntimePodman, Image: oldImage}); err != nil {
			t.Fatal(err)
		}
		waitRealNode(t, cp, r2, images.KubeVersion, 2*time.Minute)
		t.Logf("second node up and Ready: %s", time.Since(start).Round(time.Millisecond))
		start = time.Now()
		p, code, errOut := runWaitInv(t, "kubelet-image-swap-node", r2.inventory(t, cp),
			"--set", "node="+r2.node.Name, "--set", "image="+newImage, "--set", "readyTimeout=2m")
		if code != 0 || p.State != workflows.StateSucceeded {
			t.Fatalf("swap failed: exit %d: %s\n%+v", code, errOut, p)
		}
		t.Logf("kubelet-image-swap-node with podman: %s", time.Since(start).Round(time.Millisecond))
		checkSwapped(t, cp, r2, newImage, images.SwapVersion)
	})
}

// checkSwapped checks the node runs image: the running kubelet reports
// version (the one the image holds) in the Node, which is Ready and
// schedulable; the drop-in and systemd's view of the unit name the
// image; the container runs it.
func checkSwapped(t *testing.T, cp *controlplane.ControlPlane, r *realSSHNode, image, version string) {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), r.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.NodeInfo.KubeletVersion != version || !nodeIsReady(n) || n.Spec.Unschedulable {
		t.Errorf("node: kubelet %q (want %q), ready %v, unschedulable %v", n.Status.NodeInfo.KubeletVersion, version, nodeIsReady(n), n.Spec.Unschedulable)
	}
	want := "KUBELET_IMAGE=" + image
	if dropin := r.file(t, "/etc/systemd/system/kubelet.service.d/10-image.conf"); !strings.Contains(dropin, `"`+want+`"`) {
		t.Errorf("drop-in = %q", dropin)
	}
	if env := r.kubeletEnvironment(t); !strings.Contains(env, want) {
		t.Errorf("systemctl show -p Environment kubelet = %q, want %s", env, want)
	}
	out, err := r.host.Exec(t.Context(), r.runtime, "ps", "--format", "{{.Names}} {{.Image}}")
	if err != nil || !strings.Contains(string(out), "kubelet "+image+"\n") {
		t.Errorf("docker ps on the node: %q %v", out, err)
	}
}
