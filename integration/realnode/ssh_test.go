package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/images"
	"kedge.dev/kedge/integration/testhosts"
)

// A real node that is an SSH host: core logs in on the node IP, sudo
// works, and Kedge's podman kubelet.service, run by the stand-ins, runs
// the real kubelet of the image, which registers Ready with its version.
// Close puts everything back, the processes the unit started included.
func TestNodeIsAnSSHHostRunningKedgesKubeletUnit(t *testing.T) {
	tools := requireKubelet(t)
	before := readMachine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := New(t, Options{Name: "real-ssh", Dir: t.TempDir()})
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: t.TempDir(), Host: n.HostIP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	if err := n.StartRuntime(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := testhosts.Prepare(testhosts.Options{Count: 1, Names: []string{n.Name}, Addresses: []string{n.NodeIP}, Dir: filepath.Join(t.TempDir(), "host"), RealContainerd: true})
	if err != nil {
		t.Fatal(err)
	}
	h := l.Hosts[0]
	if err := n.StartSSH(ctx, h); err != nil {
		t.Fatal(err)
	}
	newBin, err := images.KubeletBinary(ctx, tools, images.SwapVersion)
	if err != nil {
		t.Fatal(err)
	}
	image := images.KubeletRef(images.SwapVersion)
	if err := SetKubeletImages(h, KubeletImage{Ref: image, Binary: newBin}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cluster := Cluster{Server: cp.Server, CAFile: cp.CAFile, CAKeyFile: cp.CAKeyFile}
	if err := n.InstallKubelet(ctx, h, cluster, UnitInput{Runtime: nodefiles.RuntimePodman, Image: image}); err != nil {
		t.Fatal(err)
	}
	p := &Process{Log: "/dev/null", done: make(chan struct{})}
	waitNode(ctx, t, cp.Client, n.Name, p, func(node *corev1.Node) bool {
		return ready(node) && node.Status.NodeInfo.KubeletVersion == images.SwapVersion
	})
	t.Logf("podman kubelet.service start to Ready: %s", time.Since(start).Round(time.Millisecond))
	// The machine's drop-in (MachineDropIn, in --config-dir) reached
	// the kubelet Kedge's unit runs.
	if err := CheckEviction(ctx, cp.Client, n.Name); err != nil {
		t.Error(err)
	}

	// Over SSH, as Kedge reaches it: core, then sudo.
	key, err := os.ReadFile(l.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	hostKeys, err := knownhosts.New(l.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", n.NodeIP+":22", &ssh.ClientConfig{User: testhosts.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hostKeys, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.CombinedOutput("id -un; sudo -n podman ps --format '{{.Names}} {{.Image}}'; sudo -n systemctl show -p Environment kubelet")
	s.Close()
	if err != nil || !strings.Contains(string(out), "core\n") || !strings.Contains(string(out), "kubelet "+image+"\n") ||
		!strings.Contains(string(out), "KUBELET_IMAGE="+image) {
		t.Errorf("over SSH: %q %v", out, err)
	}
	c.Close()

	_ = cp.Stop()
	_ = l.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, before, n)
}
