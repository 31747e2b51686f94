package realnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/activities/nodefiles"
)

// Options configure a node.
type Options struct {
	// Name is the node's name in the cluster (--hostname-override).
	Name string
	// Dir holds everything the node writes: the files behind its private
	// directories, containerd's and the kubelet's state, logs. Give each
	// node its own (t.TempDir()).
	Dir string
	// NoPodNetwork leaves the node's CNI config directory empty, for a
	// test of what installs the pod network (node-join, bootstrap): the
	// kubelet reports NotReady until a config is there.
	NoPodNetwork bool
	// Routed makes the machine a router between the nodes' links, so that
	// nodes reach each other (a cluster of several real nodes):
	// net.ipv4.ip_forward=1, saved and restored with KubeletSysctls, and
	// FORWARD rules accepting the node's link, removed by Close.
	Routed bool
	// KubeProxy readies the machine for kube-proxy on the node: the
	// machine's nf_conntrack_max is set to KubeProxyConntrackMax (kube-proxy
	// sets it on a real node; from a node's network namespace it may not),
	// saved and restored with KubeletSysctls.
	KubeProxy bool
}

// Network addresses. Node N (1..254) has the link 10.201.N.0/24 to the
// host, the host side .1 and the node .2, and gives its pods
// 10.202.N.0/24 on a bridge inside its own network namespace.
const (
	linkPrefix  = "kedge-rn" // host side of node N's veth: kedge-rnN
	maxNodes    = 254
	cgroupNames = "kedge-realnode-"
)

// privateDirs are the directories the kubelet, containerd, runc and the
// CNI plugins use at fixed paths. Each node sees its own: Dir/fs/PATH
// bind-mounted on PATH inside its mount namespace.
var privateDirs = []string{
	"/etc/kubernetes",
	"/etc/cni/net.d",
	"/var/lib/kubelet",
	"/var/lib/containerd",
	"/var/lib/cni",
	"/var/log/containers",
	"/var/log/pods",
	"/run/containerd",
	"/run/netns",
	"/usr/libexec/kubernetes",
}

// overlaid are the directories that hold privateDirs. Each is covered, in
// the node's mount namespace only, by an overlay whose upper layer is
// under Dir, so that the mount points are made there and not on the
// machine. /opt too, though it holds none of them: containerd's CRI
// makes its default CNI directory, /opt/cni/bin, which must not reach
// the machine.
var overlaid = []string{"/etc", "/var/lib", "/var/log", "/run", "/usr/libexec", "/opt"}

// Node is one real node: a mount and network namespace with a veth to the
// host, its own containerd and a real kubelet.
type Node struct {
	Name    string
	Dir     string
	Index   int    // N: the node's link and pod range
	HostIP  string // host side of the veth, 10.201.N.1
	NodeIP  string // the node's address, 10.201.N.2
	PodCIDR string // 10.202.N.0/24, the bridge's range
	Link    string // host side of the veth, kedge-rnN
	// CgroupRoot is the node's cgroupRoot, made in every cgroup
	// hierarchy: /kedge-realnode-N.
	CgroupRoot string

	opts       Options
	holder     *exec.Cmd // the process that keeps the namespaces
	holderDone chan struct{}
	mntNS      string   // /proc/PID/ns/mnt of the holder, to find the node's processes
	mntPin     *os.File // the namespace itself, open: its number is not reused while we look
	left       []int    // processes still in the namespace once the holder was gone

	mu         sync.Mutex
	procs      []*Process // containerd, kubelets
	sysctlHeld bool
	forwarding bool     // FORWARD rules for Link are in place (Routed)
	hostChains []string // the machine's KUBE-*/CNI-* iptables chains before
	closeOnce  sync.Once
	closeErr   error
}

// Path is where a file the node sees at nodePath (under one of its
// private directories) is on the machine.
func (n *Node) Path(nodePath string) string {
	return filepath.Join(n.Dir, "fs", filepath.Clean("/"+nodePath))
}

// Supported says why real nodes cannot run here, or "" when they can:
// they need root, and the tools below on the PATH.
func Supported() string {
	if os.Geteuid() != 0 {
		return "real kubelets need root (namespaces, mounts, cgroups, veth)"
	}
	for _, tool := range []string{"unshare", "nsenter", "mount", "umount", "ip", "iptables", "containerd", "containerd-shim-runc-v2", "runc", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (scripts/deps.sh installs it)"
		}
	}
	if _, err := os.Stat(cniBinDir + "/bridge"); err != nil {
		return "the CNI plugins are not installed in " + cniBinDir + " (scripts/deps.sh installs them)"
	}
	return ""
}

// New starts a node's namespaces and network (Start) and closes it when
// the test ends, whether it passed or not.
func New(t testing.TB, o Options) *Node {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	n, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("real node %s: %v", o.Name, err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close real node %s: %v", n.Name, err)
		}
	})
	return n
}

// Start makes the node's mount and network namespaces, its private
// directories, its veth to the host and its cgroups. Nothing runs in it
// yet: StartContainerd, then StartKubelet. Close undoes it all.
func Start(ctx context.Context, o Options) (*Node, error) {
	if why := Supported(); why != "" {
		return nil, errors.New(why)
	}
	if o.Name == "" || o.Dir == "" {
		return nil, errors.New("a node needs a Name and a Dir")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	// Overlay mount options are separated by commas and lower layers by
	// colons: a Dir holding either would be cut apart (a subtest's
	// t.TempDir() holds its name).
	if strings.ContainsAny(dir, ",:") {
		return nil, fmt.Errorf("node %s: its directory %q holds a comma or a colon, which overlay mount options cannot carry", o.Name, dir)
	}
	n := &Node{Name: o.Name, Dir: dir, opts: o, holderDone: make(chan struct{})}
	// The kubelet watches its manifest directory only if it exists when
	// it starts (else it looks every 20s); the unit makes it beforehand.
	for _, d := range append([]string{"logs", "overlay", nodefiles.ManifestsDir}, privateDirs...) {
		p := filepath.Join(dir, d)
		if strings.HasPrefix(d, "/") {
			p = n.Path(d)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}
	n.hostChains, _ = kubeChains(nil)
	if err := n.startHolder(ctx); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	if err := n.connect(ctx); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	if err := n.makeCgroups(); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

// holderScript runs in the new namespaces: it covers the overlaid
// directories, bind-mounts the private ones, says "ready" and then keeps
// the namespaces until it is killed. $1 is the node's Dir.
func holderScript() string {
	var b strings.Builder
	b.WriteString("set -e\nD=\"$1\"\n")
	for _, d := range overlaid {
		name := strings.ReplaceAll(strings.TrimPrefix(d, "/"), "/", "-")
		fmt.Fprintf(&b, "mkdir -p \"$D/overlay/%[1]s/upper\" \"$D/overlay/%[1]s/work\"\n", name)
		fmt.Fprintf(&b, "mount -t overlay overlay -o \"lowerdir=%[2]s,upperdir=$D/overlay/%[1]s/upper,workdir=$D/overlay/%[1]s/work\" %[2]s\n", name, d)
	}
	for _, d := range privateDirs {
		fmt.Fprintf(&b, "mkdir -p %[1]s\nmount --bind \"$D/fs%[1]s\" %[1]s\n", d)
	}
	// /var/lib/kubelet shared, as systemd leaves a host's mounts: the
	// kubelet's pod volumes, mounted in its container under its rshared
	// volume, reach containerd and the pods. The peer group is the
	// node's own (unshare --propagation private cut the machine's).
	b.WriteString("mount --make-shared " + nodefiles.KubeletDir + "\n")
	b.WriteString("echo ready\nexec sleep infinity\n")
	return b.String()
}

func (n *Node) startHolder(ctx context.Context) error {
	for _, d := range overlaid {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return fmt.Errorf("%s is not a directory on this machine: a node covers it with an overlay", d)
		}
	}
	cmd := exec.Command("unshare", "--mount", "--net", "--propagation", "private", "--", "sh", "-c", holderScript(), "sh", n.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the node's namespaces: %w", err)
	}
	n.holder = cmd
	go func() { _ = cmd.Wait(); close(n.holderDone) }()
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line) == "ready"
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if !ok {
			<-n.holderDone
			return fmt.Errorf("the node's mounts failed: %s", strings.TrimSpace(stderr.String()))
		}
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("the node's namespaces were not ready in 30s")
	}
	// A namespace's number is reused as soon as the namespace is freed
	// (another test's host may get it): the open file keeps it this
	// node's until Close has looked for what is left in it.
	nsPath := fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid)
	if n.mntPin, err = os.Open(nsPath); err != nil {
		return err
	}
	n.mntNS, err = os.Readlink(nsPath)
	return err
}

// connect makes the veth: the first free kedge-rnN on the host, its peer
// eth0 in the node, and the node's default route through the host.
func (n *Node) connect(ctx context.Context) error {
	pid := strconv.Itoa(n.holder.Process.Pid)
	for i := 1; i <= maxNodes; i++ {
		link := linkPrefix + strconv.Itoa(i)
		out, err := exec.CommandContext(ctx, "ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", pid).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "exists") {
				continue // another node has it: the kernel gives each name once
			}
			return fmt.Errorf("ip link add %s: %w: %s", link, err, out)
		}
		n.Index, n.Link = i, link
		break
	}
	if n.Link == "" {
		return fmt.Errorf("no free link name %s1..%d", linkPrefix, maxNodes)
	}
	n.HostIP = fmt.Sprintf("10.201.%d.1", n.Index)
	n.NodeIP = fmt.Sprintf("10.201.%d.2", n.Index)
	n.PodCIDR = fmt.Sprintf("10.202.%d.0/24", n.Index)
	n.CgroupRoot = "/" + cgroupNames + strconv.Itoa(n.Index)
	steps := [][]string{
		{"ip", "addr", "add", n.HostIP + "/24", "dev", n.Link},
		{"ip", "link", "set", n.Link, "up"},
		// Pods answer the host through the node.
		{"ip", "route", "add", n.PodCIDR, "via", n.NodeIP, "dev", n.Link, "onlink"},
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	script := "set -e\nip link set lo up\nip addr add " + n.NodeIP + "/24 dev eth0\nip link set eth0 up\nip route add default via " + n.HostIP + "\n"
	if out, err := n.Command(ctx, "sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("the node's network: %w: %s", err, out)
	}
	return nil
}

// Command is a command that runs inside the node's mount and network
// namespaces.
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	full := append([]string{"--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--net", "--", name}, args...)
	return exec.CommandContext(ctx, "nsenter", full...)
}

// cgroupMounts lists the cgroup hierarchies (v1, and the v2 one a hybrid
// machine also mounts).
func cgroupMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		typ := strings.Fields(post)
		if len(f) >= 5 && len(typ) > 0 && (typ[0] == "cgroup" || typ[0] == "cgroup2") {
			out = append(out, f[4])
		}
	}
	return out, nil
}

// makeCgroups makes CgroupRoot in every hierarchy (the kubelet wants it
// to exist), with the cpuset hierarchy's CPUs and memory nodes copied from
// the root, as a new cpuset cgroup has none.
func (n *Node) makeCgroups() error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	// A node that died without Close may have left this index's cgroups.
	if err := n.removeCgroups(); err != nil {
		return err
	}
	for _, m := range mounts {
		d := filepath.Join(m, n.CgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", d, err)
				}
			}
		}
	}
	return nil
}

// removeCgroups kills what is left in the node's cgroups and removes
// them, deepest first, in every hierarchy.
func (n *Node) removeCgroups() error {
	if n.CgroupRoot == "" {
		return nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var left []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		left = left[:0]
		for _, m := range mounts {
			root := filepath.Join(m, n.CgroupRoot)
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			slices.Reverse(dirs) // children after their parents in WalkDir: deepest first now
			for _, d := range dirs {
				killPids(cgroupPids(d))
				if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
					left = append(left, d)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups left: %s", strings.Join(left, " "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func cgroupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func killPids(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// nodeProcesses are the processes in the node's mount namespace but the
// holder: containerd, the kubelet, the shims (the pods' own processes are
// in mount namespaces of their own, and in the node's cgroups). After
// Close there are none to find: the namespace is gone (see Left).
func (n *Node) nodeProcesses() []int {
	if n.mntNS == "" {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == n.holder.Process.Pid {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && ns == n.mntNS {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Close stops everything the node runs and undoes what Start changed, in
// order: the kubelets (SIGTERM, then SIGKILL), containerd, the shims and
// every pod's processes; the iptables chains and the bridge made inside the
// node; its mounts; the namespaces; the host side of the veth; the
// cgroups; and the sysctls the kubelet set. It can be called again, and
// is safe on a node Start left half made.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

// Left are the processes Close found in the node's namespace after
// everything was stopped: none, unless teardown leaked one.
func (n *Node) Left() []int { return n.left }

func (n *Node) close() error {
	var errs []error
	n.mu.Lock()
	procs := slices.Clone(n.procs)
	n.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
	if n.holder != nil && n.holder.Process != nil {
		// Whatever is left in the namespace or the cgroups (shims,
		// containers): killed until none is.
		deadline := time.Now().Add(15 * time.Second)
		for {
			pids := n.nodeProcesses()
			for _, m := range n.cgroupDirs() {
				pids = append(pids, cgroupPids(m)...)
			}
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("processes still running: %v", pids))
				break
			}
			killPids(pids)
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case <-n.holderDone:
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if out, err := n.Command(ctx, "sh", "-c", n.teardownScript()).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("inside the node: %w: %s", err, out))
			}
			cancel()
			_ = syscall.Kill(-n.holder.Process.Pid, syscall.SIGKILL)
			select {
			case <-n.holderDone:
			case <-time.After(10 * time.Second):
				errs = append(errs, errors.New("the namespaces' holder did not exit"))
			}
		}
	}
	if n.mntPin != nil {
		// The namespace is still pinned: whatever is in it now is ours
		// and outlived the holder.
		if n.left = n.nodeProcesses(); len(n.left) > 0 {
			errs = append(errs, fmt.Errorf("processes left in the node's namespace: %v", n.left))
		}
		_ = n.mntPin.Close()
		n.mntPin, n.mntNS = nil, ""
	}
	if n.forwarding {
		for _, dir := range []string{"-i", "-o"} {
			if out, err := exec.Command("iptables", "-w", "-D", "FORWARD", dir, n.Link, "-j", "ACCEPT").CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("iptables -D FORWARD %s %s: %w: %s", dir, n.Link, err, out))
			}
		}
		n.forwarding = false
	}
	if n.Link != "" {
		// Gone with the namespace normally (a veth dies with its peer).
		if out, err := exec.Command("ip", "link", "del", n.Link).CombinedOutput(); err != nil && !strings.Contains(string(out), "not exist") && !strings.Contains(string(out), "Cannot find") {
			errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", n.Link, err, out))
		}
	}
	if err := n.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	n.mu.Lock()
	if n.sysctlHeld {
		n.sysctlHeld = false
		if err := releaseSysctls(); err != nil {
			errs = append(errs, err)
		}
	}
	n.mu.Unlock()
	if now, err := kubeChains(nil); err == nil {
		if added := newNames(n.hostChains, now); len(added) > 0 {
			errs = append(errs, fmt.Errorf("iptables chains appeared on the machine while the node ran: %s", strings.Join(added, " ")))
		}
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mounts), n.Dir) {
		errs = append(errs, fmt.Errorf("mounts of %s on the machine", n.Dir))
	}
	return errors.Join(errs...)
}

func (n *Node) cgroupDirs() []string {
	if n.CgroupRoot == "" {
		return nil
	}
	mounts, _ := cgroupMounts()
	var out []string
	for _, m := range mounts {
		_ = filepath.WalkDir(filepath.Join(m, n.CgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// teardownScript runs inside the node once nothing else does: it removes
// every iptables rule and chain (all of them were made there by the
// kubelet and the CNI plugins: the namespace started with none), the pod
// bridge, and the mounts, innermost first.
func (n *Node) teardownScript() string {
	var b strings.Builder
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			fmt.Fprintf(&b, "%[1]s -t %[2]s -F 2>/dev/null; %[1]s -t %[2]s -X 2>/dev/null\n", ipt, table)
		}
	}
	b.WriteString("ip link del " + bridgeName + " 2>/dev/null\n")
	// Mounts containerd and the kubelet made (the pods' rootfs, netns
	// pins, volumes) under the private directories, then ours.
	b.WriteString("for m in $(awk '{print $5}' /proc/self/mountinfo | sort -r); do case \"$m\" in")
	for _, d := range append(slices.Clone(privateDirs), overlaid...) {
		fmt.Fprintf(&b, " %[1]s|%[1]s/*)", d)
		b.WriteString(" umount -l \"$m\" 2>/dev/null;;")
	}
	b.WriteString(" esac; done\ntrue\n")
	return b.String()
}

// kubeChains lists the KUBE-* and CNI-* iptables chains of the current
// network namespace (nil: the machine's), as TABLE/CHAIN.
func kubeChains(n *Node) ([]string, error) {
	var out []string
	for _, table := range []string{"filter", "nat", "mangle", "raw"} {
		var cmd *exec.Cmd
		if n == nil {
			cmd = exec.Command("iptables-save", "-t", table)
		} else {
			cmd = n.Command(context.Background(), "iptables-save", "-t", table)
		}
		b, err := cmd.Output()
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, ":"); ok {
				name, _, _ = strings.Cut(name, " ")
				if strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-") {
					out = append(out, table+"/"+name)
				}
			}
		}
	}
	return out, nil
}

func newNames(before, after []string) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			out = append(out, a)
		}
	}
	return out
}
