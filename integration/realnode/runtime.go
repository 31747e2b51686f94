package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kedge.dev/kedge/integration/images"
)

const (
	// cniBinDir is where Debian's containernetworking-plugins are.
	cniBinDir = "/usr/lib/cni"
	// bridgeName is the pods' bridge inside each node.
	bridgeName = "cni0"
	// ContainerdSocket is containerd's socket as the node sees it: the
	// default the kubelet configuration Kedge renders names.
	ContainerdSocket = "/run/containerd/containerd.sock"
	// CNIConfigPath is the node's bridge network.
	CNIConfigPath = "/etc/cni/net.d/10-kedge-test-bridge.conflist"
)

// Process is a program the node runs (containerd, a kubelet).
type Process struct {
	Name string
	Log  string // its output, on the machine
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Exited says whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the process ends.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM, and SIGKILL after 10s. It waits for the end.
func (p *Process) Stop() {
	if ok, _ := p.Exited(); ok {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Output is what the process has written so far.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// Tail is the last n bytes of Output.
func (p *Process) Tail(n int) string {
	s := p.Output()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// run starts a program inside the node, its output in Dir/logs/NAME.log
// (NAME-2.log for the second of the name, and so on).
func (n *Node) run(name, bin string, args ...string) (*Process, error) {
	log := filepath.Join(n.Dir, "logs", name+".log")
	for i := 2; ; i++ {
		if _, err := os.Stat(log); os.IsNotExist(err) {
			break
		}
		log = filepath.Join(n.Dir, "logs", name+"-"+strconv.Itoa(i)+".log")
	}
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := n.Command(context.Background(), bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	return p, nil
}

// containerdConfig is containerd's configuration (version 2, containerd
// 1.6): its state in the node's private /var/lib/containerd and
// /run/containerd, no listener but its socket, the CRI plugin with the
// test world's pause image, runc with cgroupfs, and the CNI plugins of
// this machine with the node's config directory.
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = %[1]q

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[2]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[3]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = %[4]q
  conf_dir = %[5]q
`, ContainerdSocket, filepath.Join(n.Dir, "containerd-opt"), images.PauseRef(), cniBinDir, filepath.Dir(CNIConfigPath))
}

// cniConfig is the node's pod network: a bridge inside the node, the
// node its gateway, addresses from PodCIDR, then loopback.
func (n *Node) cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kedge-test",
		"plugins": []map[string]any{
			{
				"type": "bridge", "bridge": bridgeName, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": "/var/lib/cni/networks",
				},
			},
			{"type": "loopback"},
		},
	}, "", "  ")
}

// StartContainerd writes the node's CNI config (unless NoPodNetwork) and
// starts its containerd, returning when it answers on its socket.
func (n *Node) StartContainerd(ctx context.Context) (*Process, error) {
	if !n.opts.NoPodNetwork {
		cni, err := n.cniConfig()
		if err != nil {
			return nil, err
		}
		if err := n.WriteFile(CNIConfigPath, cni, 0o644); err != nil {
			return nil, err
		}
	}
	config := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(n.containerdConfig()), 0o644); err != nil {
		return nil, err
	}
	p, err := n.run("containerd", "containerd", "--config", config)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if out, err := n.Command(ctx, "ctr", "-a", ContainerdSocket, "version").CombinedOutput(); err == nil && strings.Contains(string(out), "Server:") {
			return p, nil
		}
		if ok, err := p.Exited(); ok {
			return nil, fmt.Errorf("containerd exited (%v): %s", err, p.Tail(2000))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("containerd did not answer in 60s: %s", p.Tail(2000))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Import loads docker-archives (integration/images) into the node's
// containerd, for the kubelet.
func (n *Node) Import(ctx context.Context, archives ...string) error {
	prefix := []string{"nsenter", "--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--net", "--"}
	return images.ImportVia(ctx, prefix, ContainerdSocket, archives...)
}

// WriteFile writes a file the node sees at nodePath atomically: to a
// temporary name beside it, then renamed (the kubelet reads a static pod
// manifest half written otherwise). Temporary names start with a dot,
// which the kubelet skips in its manifest directory.
func (n *Node) WriteFile(nodePath string, data []byte, mode os.FileMode) error {
	p := n.Path(nodePath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp."+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}

// StartRuntime starts the node's containerd and imports the test world's
// pause image into it: every pod sandbox needs it, and there is no
// registry to pull it from.
func (n *Node) StartRuntime(ctx context.Context) error {
	if _, err := n.StartContainerd(ctx); err != nil {
		return err
	}
	pause, err := images.Pause(ctx)
	if err != nil {
		return err
	}
	archives, err := images.Build(pause)
	if err != nil {
		return err
	}
	return n.Import(ctx, archives...)
}

// Diagnose is what a failed test prints about the node's runtime: the
// containers and tasks its containerd holds for the kubelet (k8s.io) and
// the end of containerd's log.
func (n *Node) Diagnose(ctx context.Context) string {
	var b strings.Builder
	for _, what := range []string{"containers", "tasks"} {
		out, err := n.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", what, "ls").CombinedOutput()
		fmt.Fprintf(&b, "\n%s ctr %s ls (%v):\n%s", n.Name, what, err, out)
	}
	for _, pid := range n.nodeProcesses() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state is the field after the command's parenthesis.
		state := "?"
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		args := strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))
		if len(args) > 3 {
			args = args[:3]
		}
		fmt.Fprintf(&b, "\n%s pid %d state %s: %s", n.Name, pid, state, strings.Join(args, " "))
	}
	n.mu.Lock()
	procs := slices.Clone(n.procs)
	n.mu.Unlock()
	for _, p := range procs {
		if p.Name == "containerd" {
			fmt.Fprintf(&b, "\n%s containerd log:\n%s", n.Name, p.Tail(4000))
		}
	}
	return b.String()
}

// RunningImages are the node's running containers (the kubelet's, in
// containerd's k8s.io namespace) by image: the PID of each one's first
// process.
func (n *Node) RunningImages(ctx context.Context) (map[string][]int, error) {
	table := func(what string) ([][]string, error) {
		out, err := n.Command(ctx, "ctr", "-a", ContainerdSocket, "-n", "k8s.io", what, "ls").Output()
		if err != nil {
			return nil, fmt.Errorf("ctr %s ls: %w", what, err)
		}
		var rows [][]string
		for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); i > 0 && len(f) >= 3 {
				rows = append(rows, f)
			}
		}
		return rows, nil
	}
	containers, err := table("containers") // CONTAINER IMAGE RUNTIME
	if err != nil {
		return nil, err
	}
	tasks, err := table("tasks") // TASK PID STATUS
	if err != nil {
		return nil, err
	}
	image := map[string]string{}
	for _, c := range containers {
		image[c[0]] = c[1]
	}
	out := map[string][]int{}
	for _, t := range tasks {
		pid, err := strconv.Atoi(t[1])
		if err != nil || t[2] != "RUNNING" || image[t[0]] == "" {
			continue
		}
		out[image[t[0]]] = append(out[image[t[0]]], pid)
	}
	return out, nil
}
