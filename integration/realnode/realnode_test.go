package realnode

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/images"

	"kedge.dev/kedge/actions/render"
)

// requireRoot skips a test that cannot run here: only when not root
// (make test runs as root); in -short mode, as every test that starts
// real servers does. A missing package is a failure: scripts/deps.sh
// installs them.
func requireRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real nodes")
	}
	if os.Geteuid() != 0 {
		t.Skip("real nodes need root (namespaces, mounts, cgroups, veth)")
	}
	if why := Supported(); why != "" {
		t.Fatal(why)
	}
}

// requireKubelet also needs the kubelet binary in the tools directory
// (make test builds it), and returns that directory.
func requireKubelet(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tools, "kubelet")); err != nil {
		t.Skipf("no kubelet in %s (scripts/kube-tools.sh builds it)", tools)
	}
	return tools
}

// machineState is what a node may change on the machine and must put
// back.
type machineState struct {
	sysctls map[string]string
	links   []string
	cgroups []string
}

func readMachine(t *testing.T) machineState {
	t.Helper()
	s, err := ReadSysctls()
	if err != nil {
		t.Fatal(err)
	}
	st := machineState{sysctls: s}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, linkPrefix) {
			st.links = append(st.links, i.Name)
		}
	}
	mounts, _ := cgroupMounts()
	for _, m := range mounts {
		found, _ := filepath.Glob(filepath.Join(m, cgroupNames+"*"))
		st.cgroups = append(st.cgroups, found...)
	}
	return st
}

func checkRestored(t *testing.T, before machineState, nodes ...*Node) {
	t.Helper()
	after := readMachine(t)
	// Another test process running real nodes (go test runs packages at
	// once) holds the machine's sysctls until its own end: the last of
	// them restores what the first saved.
	original, others, err := machineOriginal()
	switch {
	case err != nil:
		t.Errorf("the machine's saved sysctls: %v", err)
	case len(others) > 0:
		t.Logf("sysctls held by processes %v (real nodes of theirs): the last to end restores %v", others, original)
	case original == nil:
		// Never held on this machine (a new one, no kubelet run yet):
		// they must be as they were before the test.
		if !reflect.DeepEqual(before.sysctls, after.sysctls) {
			t.Errorf("sysctls changed: before %v, after %v", before.sysctls, after.sysctls)
		}
	case !reflect.DeepEqual(original, after.sysctls):
		t.Errorf("sysctls not restored: saved %v, after %v (before this test %v)", original, after.sysctls, before.sysctls)
	}
	for _, n := range nodes {
		for _, l := range after.links {
			if l == n.Link {
				t.Errorf("link %s left", l)
			}
		}
		for _, c := range after.cgroups {
			if filepath.Base(c) == strings.TrimPrefix(n.CgroupRoot, "/") {
				t.Errorf("cgroup %s left", c)
			}
		}
		if ps := n.Left(); len(ps) > 0 {
			t.Errorf("processes of %s left: %v", n.Name, ps)
		}
		select {
		case <-n.holderDone:
		default:
			t.Errorf("%s's namespaces still held", n.Name)
		}
	}
}

func TestNodeHasItsOwnNamespacesAndLeavesNothing(t *testing.T) {
	requireRoot(t)
	before := readMachine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Setenv("KEDGE_IMAGES_CACHE", t.TempDir())
	n := New(t, Options{Name: "harness", Dir: t.TempDir()})
	if !strings.HasPrefix(n.NodeIP, "10.201.") || n.HostIP == n.NodeIP {
		t.Fatalf("addresses %s %s", n.HostIP, n.NodeIP)
	}
	// The node's private directories are the node's: a file written
	// there from the machine is seen at the unit's path inside, and the
	// machine's own path is not touched.
	if err := n.WriteFile("/etc/kubernetes/probe", []byte("here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := n.Command(ctx, "cat", "/etc/kubernetes/probe").CombinedOutput()
	if err != nil || string(out) != "here\n" {
		t.Fatalf("inside the node: %q %v", out, err)
	}
	if _, err := os.Stat("/etc/kubernetes/probe"); err == nil {
		t.Fatal("the node's /etc/kubernetes is the machine's")
	}
	// The node reaches the host side of its link (where a control plane
	// listens) from its own address.
	l, err := net.Listen("tcp", net.JoinHostPort(n.HostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			fmt.Fprintf(c, "%s\n", c.RemoteAddr())
			c.Close()
		}
	}()
	c, err := n.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial the host from the node: %v", err)
	}
	buf := make([]byte, 64)
	k, _ := c.Read(buf)
	c.Close()
	if !strings.HasPrefix(string(buf[:k]), n.NodeIP+":") {
		t.Errorf("the host saw the node as %q, want %s", buf[:k], n.NodeIP)
	}
	// Its containerd runs and takes registry-free images.
	if err := n.StartRuntime(ctx); err != nil {
		t.Fatal(err)
	}
	out, err = n.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", "images", "ls", "-q").CombinedOutput()
	if err != nil || !strings.Contains(string(out), images.PauseRef()) {
		t.Fatalf("images after import: %s %v", out, err)
	}
	// A container runs, in the node's cgroups.
	run := n.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", "run", "-d",
		"--cgroup", n.CgroupRoot+"/probe", images.PauseRef(), "probe")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("ctr run: %s %v", out, err)
	}
	out, _ = n.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if !strings.Contains(string(out), "RUNNING") {
		t.Errorf("tasks: %s", out)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	checkRestored(t, before, n)
}

func TestCleanupPutsBackANodeTheTestLeftRunning(t *testing.T) {
	requireRoot(t)
	before := readMachine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var n *Node
	t.Run("leaves a node running", func(t *testing.T) {
		n = New(t, Options{Name: "left", Dir: t.TempDir()})
		if err := n.StartRuntime(ctx); err != nil {
			t.Fatal(err)
		}
		run := n.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", "run", "-d",
			"--cgroup", n.CgroupRoot+"/left", images.PauseRef(), "left")
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("ctr run: %s %v", out, err)
		}
		// No Close: the subtest's cleanup does it.
	})
	if n == nil || n.holder == nil {
		t.Fatal("no node was made")
	}
	checkRestored(t, before, n)
}

func TestKubeletUnitArgsExpandsLikeSystemd(t *testing.T) {
	unitFile := []byte(`[Service]
Environment=KUBELET_IMAGE=images.example/kubelet:v1 "OTHER=a b"
ExecStart=/usr/bin/podman run --rm \
    --volume /x:/y \
    ${KUBELET_IMAGE} \
    --config=/etc/kubernetes/kubelet.yaml \
    --flag=${OTHER} $OTHER
`)
	dropin := []byte("[Service]\nEnvironment=KUBELET_IMAGE=images.example/kubelet:v2\n")
	image, args, err := KubeletUnitArgs(unitFile, dropin)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--config=/etc/kubernetes/kubelet.yaml", "--flag=a b", "a", "b"}
	if image != "images.example/kubelet:v2" || !reflect.DeepEqual(args, want) {
		t.Errorf("got %s %q, want images.example/kubelet:v2 %q", image, args, want)
	}
	if _, _, err := KubeletUnitArgs([]byte("[Service]\nExecStart=/bin/true\n")); err == nil {
		t.Error("a unit without the image variable gave no error")
	}
}

func TestForThisMachineChangesOnlyWhatThisMachineNeeds(t *testing.T) {
	cfg, err := nodefiles.KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		t.Fatal(err)
	}
	adjusted, err := ForThisMachine(cfg, "/kedge-realnode-7")
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	if err := yamlUnmarshal(cfg, &before); err != nil {
		t.Fatal(err)
	}
	if err := yamlUnmarshal(adjusted, &after); err != nil {
		t.Fatal(err)
	}
	changed := map[string]bool{}
	for k, v := range after {
		if !reflect.DeepEqual(before[k], v) {
			changed[k] = true
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s removed", k)
		}
	}
	allowed := map[string]bool{"failCgroupV1": true, "cgroupDriver": true, "cgroupRoot": true, "resolvConf": true,
		"evictionHard": true, "imageGCHighThresholdPercent": true, "imageGCLowThresholdPercent": true, "syncFrequency": true}
	for k := range changed {
		if !allowed[k] {
			t.Errorf("%s changed: %v -> %v", k, before[k], after[k])
		}
	}
	if after["cgroupDriver"] != "cgroupfs" || after["cgroupRoot"] != "/kedge-realnode-7" {
		t.Errorf("adjusted: %v", after)
	}
}

// unknownArgs are how a kubelet refuses its command line.
var unknownArgs = []string{"unknown flag", "unknown command", "unknown shorthand flag"}

// checkKubeletAccepts runs the kubelet with args in n and reports whether
// it started (served /healthz) or refused them. The kubelet is stopped
// after.
func checkKubeletAccepts(t *testing.T, n *Node, bin string, config []byte, args []string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := n.StartKubelet(bin, config, args)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := n.WaitKubeletHealthy(ctx, p); err != nil {
		return err
	}
	for _, u := range unknownArgs {
		if strings.Contains(p.Output(), u) {
			return fmt.Errorf("the kubelet logged %q: %s", u, p.Tail(2000))
		}
	}
	return nil
}

func TestRealKubelets(t *testing.T) {
	tools := requireKubelet(t)
	bin := filepath.Join(tools, "kubelet")
	version, err := KubeletVersion(bin)
	if err != nil {
		t.Fatal(err)
	}
	before := readMachine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	node1 := New(t, Options{Name: "real-1", Dir: t.TempDir()})
	start := time.Now()
	// The API server listens on the host side of the first node's link:
	// every node reaches it through its own link to the host.
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: t.TempDir(), Host: node1.HostIP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	t.Logf("control plane on %s in %s", cp.Server, time.Since(start).Round(time.Millisecond))
	cluster := Cluster{Server: cp.Server, CAFile: cp.CAFile, CAKeyFile: cp.CAKeyFile}
	pause, err := images.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	archives, err := images.Build(pause)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("registers as its node and becomes Ready", func(t *testing.T) {
		if err := node1.JoinWithCertificate(cluster); err != nil {
			t.Fatal(err)
		}
		if _, err := node1.StartContainerd(ctx); err != nil {
			t.Fatal(err)
		}
		if err := node1.Import(ctx, archives...); err != nil {
			t.Fatal(err)
		}
		config, err := node1.KubeletConfig()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p, err := node1.StartKubelet(bin, config, node1.DefaultArgs())
		if err != nil {
			t.Fatal(err)
		}
		node := waitNode(ctx, t, cp.Client, node1.Name, p, func(n *corev1.Node) bool { return ready(n) })
		t.Logf("kubelet start to Ready: %s", time.Since(start).Round(time.Millisecond))
		if got := node.Status.NodeInfo.KubeletVersion; got != version {
			t.Errorf("kubeletVersion %q, the binary says %q", got, version)
		}
		var internal string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = a.Address
			}
		}
		if internal != node1.NodeIP {
			t.Errorf("node addresses %v, want InternalIP %s", node.Status.Addresses, node1.NodeIP)
		}
		// The kubelet took this machine's eviction thresholds: no disk
		// pressure on a machine whose disk is nearly full.
		if err := CheckEviction(ctx, cp.Client, node1.Name); err != nil {
			t.Error(err)
		}
		// It is the node, and only the node: its credentials are
		// system:node:real-1's, which may not read the cluster's secrets.
		kc := nodeClient(t, node1)
		if _, err := kc.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the node's credentials listed secrets: %v", err)
		}
		if _, err := kc.CoreV1().Nodes().Get(ctx, node1.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the node's credentials cannot read its Node: %v", err)
		}
	})

	t.Run("runs a static pod in containerd", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: static-pause
  namespace: default
spec:
  containers:
  - name: pause
    image: %s
    imagePullPolicy: Never
`, images.PauseRef())
		start := time.Now()
		if err := node1.WriteFile(nodefiles.ManifestsDir+"/static-pause.yaml", []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		_, podNet, _ := net.ParseCIDR(node1.PodCIDR)
		var pod *corev1.Pod
		deadline := time.Now().Add(2 * time.Minute)
		for {
			pod, err = cp.Client.CoreV1().Pods("default").Get(ctx, "static-pause-"+node1.Name, metav1.GetOptions{})
			if err == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the static pod's mirror: %v %v\nkubelet: %s", pod, err, lastKubelet(node1).Tail(3000))
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Logf("manifest to Running: %s", time.Since(start).Round(time.Millisecond))
		if !podNet.Contains(net.ParseIP(pod.Status.PodIP)) {
			t.Errorf("pod IP %s not in the node's bridge range %s", pod.Status.PodIP, node1.PodCIDR)
		}
		out, err := node1.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
		if err != nil || strings.Count(string(out), "RUNNING") < 2 {
			t.Errorf("containerd's tasks (want the sandbox and the container running): %s %v", out, err)
		}
	})

	t.Run("runs the kubelet image's second version, seen in the node", func(t *testing.T) {
		// Both kubelet images and the control-plane images import into
		// the node's containerd under the names Kedge's runbooks use.
		start := time.Now()
		var imgs []images.Image
		for _, v := range []string{images.KubeVersion, images.SwapVersion} {
			img, err := images.Kubelet(ctx, tools, v)
			if err != nil {
				t.Fatal(err)
			}
			imgs = append(imgs, img)
		}
		cpImages, err := images.ControlPlane(tools)
		if err != nil {
			t.Fatal(err)
		}
		built, err := images.Build(append(imgs, cpImages...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := node1.Import(ctx, built...); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d images built (or found cached) and imported in %s", len(built), time.Since(start).Round(time.Millisecond))
		out, err := node1.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", "images", "ls", "-q").CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range append(imgs, cpImages...) {
			if !strings.Contains(string(out), img.Ref+"\n") {
				t.Errorf("%s not in the node's images:\n%s", img.Ref, out)
			}
		}
		// The second version's kubelet reports its own version: a swap
		// is seen in the Node.
		swap, err := images.KubeletBinary(ctx, tools, images.SwapVersion)
		if err != nil {
			t.Fatal(err)
		}
		lastKubelet(node1).Stop()
		p, err := node1.StartKubelet(swap, nil, node1.DefaultArgs())
		if err != nil {
			t.Fatal(err)
		}
		waitNode(ctx, t, cp.Client, node1.Name, p, func(n *corev1.Node) bool {
			return ready(n) && n.Status.NodeInfo.KubeletVersion == images.SwapVersion
		})
	})

	node2 := New(t, Options{Name: "real-2", Dir: t.TempDir()})
	var unitArgs []string
	var config []byte
	t.Run("accepts the rendered unit's ExecStart arguments", func(t *testing.T) {
		image := images.KubeletRef(images.KubeVersion)
		var all [][]string
		var units [][]byte
		for _, rt := range []string{nodefiles.RuntimePodman, nodefiles.RuntimeDocker} {
			u, err := nodefiles.KubeletUnit(render.KubeletUnitInput{Runtime: rt, Image: image, Node: node2.Name,
				Role: nodefiles.RoleWorker, NodeIP: node2.NodeIP})
			if err != nil {
				t.Fatal(err)
			}
			units = append(units, u)
			img, args, err := KubeletUnitArgs(u)
			if err != nil {
				t.Fatal(err)
			}
			if img != image {
				t.Errorf("%s unit's image %q, want %q", rt, img, image)
			}
			all = append(all, args)
		}
		if !reflect.DeepEqual(all[0], all[1]) {
			t.Errorf("the podman and docker units pass the kubelet different arguments:\n%q\n%q", all[0], all[1])
		}
		unitArgs = all[0]
		t.Logf("kubelet arguments from the unit: %q", unitArgs)
		// What the unit's ExecStartPre makes before the kubelet starts.
		dirs, err := KubeletUnitDirs(units[0])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(dirs, nodefiles.KubeletConfigDropInDir) {
			t.Errorf("the unit does not make --config-dir %s: %q", nodefiles.KubeletConfigDropInDir, dirs)
		}
		for _, d := range dirs {
			if err := os.MkdirAll(node2.Path(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := node2.JoinWithCertificate(cluster); err != nil {
			t.Fatal(err)
		}
		if _, err := node2.StartContainerd(ctx); err != nil {
			t.Fatal(err)
		}
		if err := node2.Import(ctx, archives...); err != nil {
			t.Fatal(err)
		}
		if config, err = node2.KubeletConfig(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := checkKubeletAccepts(t, node2, bin, config, unitArgs); err != nil {
			t.Fatalf("the real kubelet refused the rendered unit's arguments %q: %v", unitArgs, err)
		}
		t.Logf("kubelet start to /healthz: %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("refuses them with a positional kubelet", func(t *testing.T) {
		if unitArgs == nil {
			t.Skip("no arguments from the unit")
		}
		args := append([]string{"kubelet"}, unitArgs...)
		err := checkKubeletAccepts(t, node2, bin, config, args)
		if err == nil || !strings.Contains(err.Error(), "unknown command kubelet") {
			t.Errorf("a positional kubelet: %v, want \"unknown command kubelet\"", err)
		}
	})

	// Everything is put back, the sysctls the kubelet set included.
	_ = cp.Stop()
	for _, n := range []*Node{node2, node1} {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}
	checkRestored(t, before, node1, node2)
}

func lastKubelet(n *Node) *Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.procs) - 1; i >= 0; i-- {
		if n.procs[i].Name == "kubelet" {
			return n.procs[i]
		}
	}
	return &Process{Log: "/dev/null"}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, p *Process, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(n) {
			return n
		}
		if exited, werr := p.Exited(); exited {
			t.Fatalf("the kubelet exited (%v): %s", werr, p.Tail(3000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: %v %v\nkubelet: %s", name, n, err, p.Tail(3000))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// nodeClient is a client with the node's own credentials, reaching the
// API server from the machine.
func nodeClient(t *testing.T, n *Node) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Path(nodefiles.KubeletKubeconfigPath))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(cfg.CertData)
	if block == nil {
		t.Fatal("no client certificate in the node's kubeconfig")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:"+n.Name || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("the node's certificate is for %v", cert.Subject)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }
