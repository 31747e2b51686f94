package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/testhosts"

	"kedge.dev/kedge/actions/render"
)

// sshCgroup is where, under the node's CgroupRoot, its sshd and
// everything started through it run.
const sshCgroup = "ssh"

// StartSSH makes the node an SSH test host: h, prepared by
// testhosts.Prepare with the node's address (Options.Addresses), becomes
// an sshd inside the node's namespaces listening on NodeIP:22, where Kedge
// logs in as testhosts.User and becomes root with sudo. The host's
// stand-ins (systemctl, docker, podman) are in /usr/local/sbin inside the
// node, its image store in /var/lib/kedge-lab (the node's /var/lib).
//
// The sshd runs in a cgroup of the node's own (CgroupRoot/ssh in every
// hierarchy), so everything it starts, which leaves the node's mount
// namespace when the container stand-in runs a kubelet, is still the
// node's: Close finds and stops it. The kubelet sysctls are held from
// here on, as a kubelet started over SSH changes them as any other does.
//
// Start containerd and import images (Import) before: the host's mounts
// are made in the node's mount namespace.
func (n *Node) StartSSH(ctx context.Context, h *testhosts.Host) error {
	if h.Address != n.NodeIP || h.Port != 22 {
		return fmt.Errorf("host %s is at %s:%d, the node at %s:22", h.Name, h.Address, h.Port, n.NodeIP)
	}
	if err := n.makeCgroup(sshCgroup); err != nil {
		return err
	}
	n.mu.Lock()
	if !n.sysctlHeld {
		if err := holdSysctls(); err != nil {
			n.mu.Unlock()
			return err
		}
		n.sysctlHeld = true
	}
	n.mu.Unlock()
	if n.opts.Routed {
		if err := n.route(); err != nil {
			return err
		}
	}
	if n.opts.KubeProxy {
		if err := holdConntrackForKubeProxy(); err != nil {
			return err
		}
	}
	p, err := n.run("sshd", "sh", "-c", h.InsideScript(), "sh", h.Dir())
	if err != nil {
		return err
	}
	// nsenter enters the namespaces and execs the script, which execs
	// sshd: one process, moved before it accepts anyone.
	pid := p.cmd.Process.Pid
	if err := n.joinCgroup(sshCgroup, pid); err != nil {
		return err
	}
	addr := net.JoinHostPort(n.NodeIP, "22")
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if ok, werr := p.Exited(); ok {
			return fmt.Errorf("sshd on %s exited (%v): %s", n.Name, werr, p.Tail(2000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd on %s did not listen on %s in 30s: %s", n.Name, addr, p.Tail(2000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	h.Started(pid)
	// The machine's kubelet settings, as its provisioning would leave
	// them: Kedge's own files come later, from Kedge.
	dropIn, err := MachineDropIn(n.CgroupRoot)
	if err != nil {
		return err
	}
	return n.WriteFile(MachineDropInPath, dropIn, 0o644)
}

// route lets traffic between this node's link and the others' through
// the machine (Options.Routed). The sysctls are held already.
func (n *Node) route() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("net.ipv4.ip_forward: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, dir := range []string{"-i", "-o"} {
		// Rules for this link name left by a run killed before its
		// Close (the name is this node's now) go first: Close then
		// leaves none.
		for range 100 {
			if exec.Command("iptables", "-w", "-D", "FORWARD", dir, n.Link, "-j", "ACCEPT").Run() != nil {
				break
			}
		}
		if out, err := exec.Command("iptables", "-w", "-I", "FORWARD", dir, n.Link, "-j", "ACCEPT").CombinedOutput(); err != nil {
			return fmt.Errorf("iptables -I FORWARD %s %s: %w: %s", dir, n.Link, err, out)
		}
		n.forwarding = true
	}
	return nil
}

// makeCgroup makes CgroupRoot/name in every hierarchy, with the cpuset
// hierarchy's CPUs and memory nodes copied from the root.
func (n *Node) makeCgroup(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		d := filepath.Join(m, n.CgroupRoot, name)
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

// joinCgroup moves a process into CgroupRoot/name in every hierarchy.
func (n *Node) joinCgroup(name string, pid int) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		f := filepath.Join(m, n.CgroupRoot, name, "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("move %d into %s: %w", pid, f, err))
		}
	}
	return errors.Join(errs...)
}

// KubeletImage is one kubelet image on a node's SSH host: its reference
// (quay.io/poseidon/kubelet:TAG) and the kubelet binary on the machine
// that stands for it.
type KubeletImage struct {
	Ref    string
	Binary string
}

// SetKubeletImages makes the host's container stand-in run each image's
// kubelet: each binary is installed in the host's /usr/local/sbin and the
// image store maps the image to it, and to nothing else (the simulator's
// images are gone from it).
func SetKubeletImages(h *testhosts.Host, imgs ...KubeletImage) error {
	var store []testhosts.Image
	for _, im := range imgs {
		_, tag, ok := strings.Cut(im.Ref[strings.LastIndex(im.Ref, "/")+1:], ":")
		if !ok || tag == "" {
			return fmt.Errorf("kubelet image %q has no tag", im.Ref)
		}
		path, err := h.InstallProgram("kubelet-"+tag, im.Binary)
		if err != nil {
			return fmt.Errorf("install the kubelet of %s: %w", im.Ref, err)
		}
		store = append(store, testhosts.Image{Ref: im.Ref, Entrypoint: []string{path}})
	}
	return h.SetImages(store...)
}

// UnitInput is how InstallKubelet renders kubelet.service.
type UnitInput struct {
	Runtime string // render.RuntimeDocker or render.RuntimePodman
	Image   string // the kubelet image, in KUBELET_IMAGE
	Role    string // render.RoleWorker (default) or render.RoleController
}

// InstallKubelet installs and starts the kubelet on a node that is an SSH
// host (StartSSH), as Kedge's node-join leaves a node: the node's
// certificate and kubeconfig (JoinWithCertificate), the
// KubeletConfiguration (KubeletConfig: Kedge's, adjusted for this
// machine), and kubelet.service rendered by Kedge (render.KubeletUnit for
// the runtime, with the node's name and address), which the host's
// systemctl stand-in starts: the container stand-in runs the image's
// kubelet (SetKubeletImages) with the unit's volumes and flags.
func (n *Node) InstallKubelet(ctx context.Context, h *testhosts.Host, c Cluster, in UnitInput) error {
	if in.Role == "" {
		in.Role = nodefiles.RoleWorker
	}
	if err := n.JoinWithCertificate(c); err != nil {
		return err
	}
	// Kedge's config as rendered: StartSSH left this machine's settings
	// in the kubelet's --config-dir.
	config, err := nodefiles.KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		return err
	}
	if err := n.WriteFile(nodefiles.KubeletConfigPath, config, 0o644); err != nil {
		return err
	}
	if in.Runtime == nodefiles.RuntimePodman {
		if err := n.addSysfsDir(ctx, "selinux"); err != nil {
			return err
		}
	}
	unit, err := nodefiles.KubeletUnit(render.KubeletUnitInput{Runtime: in.Runtime, Image: in.Image, Node: n.Name, Role: in.Role, NodeIP: n.NodeIP})
	if err != nil {
		return err
	}
	if err := h.WriteFile("/etc/systemd/system/kubelet.service", unit, 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"daemon-reload"}, {"enable", "kubelet"}, {"start", "kubelet"}} {
		if out, err := n.HostCommand(ctx, "systemctl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("systemctl %s on %s: %w: %s%s", strings.Join(args, " "), n.Name, err, out, n.UnitLog(h, "kubelet"))
		}
	}
	return nil
}

// addSysfsDir gives the node an empty /sys/fs/NAME. Kedge's podman unit
// (Typhoon's, for Fedora CoreOS, where SELinux is always on) mounts
// /sys/fs/selinux into the kubelet's container, and podman refuses a
// volume whose source does not exist; this machine has no SELinux, and
// sysfs takes no new directories. So, in the node's mount namespace only,
// /sys/fs becomes a tmpfs holding the machine's /sys/fs entries (bound
// back, with the cgroup hierarchies under them) and the empty NAME.
func (n *Node) addSysfsDir(ctx context.Context, name string) error {
	if _, err := os.Stat("/sys/fs/" + name); err == nil {
		return nil
	}
	keep := filepath.Join(n.Dir, "sysfs")
	script := `set -e
K="$1"
if [ -d /sys/fs/"$2" ]; then exit 0; fi
mkdir -p "$K"
mount --rbind /sys/fs "$K"
mount -t tmpfs -o mode=755 tmpfs /sys/fs
for d in "$K"/*; do
	b=$(basename "$d")
	mkdir /sys/fs/"$b"
	mount --rbind "$d" /sys/fs/"$b"
done
mkdir /sys/fs/"$2"
`
	if out, err := n.Command(ctx, "sh", "-c", script, "sh", keep, name).CombinedOutput(); err != nil {
		return fmt.Errorf("/sys/fs/%s in %s: %w: %s", name, n.Name, err, out)
	}
	return nil
}

// HostCommand is a command that runs as the node's SSH sessions do:
// inside its mount and network namespaces, in its ssh cgroup (so what it
// starts is stopped by Close), with the host's PATH (the stand-ins
// first). Use it for what starts processes on the node (systemctl start);
// testhosts.Host.Exec does not enter the node's network namespace.
func (n *Node) HostCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	mounts, _ := cgroupMounts()
	var procs []string
	for _, m := range mounts {
		procs = append(procs, strconv.Quote(filepath.Join(m, n.CgroupRoot, sshCgroup, "cgroup.procs")))
	}
	script := "for f in " + strings.Join(procs, " ") + "; do echo $$ > \"$f\"; done; exec \"$@\""
	cmd := n.Command(ctx, "sh", append([]string{"-c", script, "sh", name}, args...)...)
	cmd.Env = []string{"PATH=" + testhosts.StandInDir + ":/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	return cmd
}

// UnitLog is the last of a unit's output on the host (the systemctl
// stand-in's log), for error messages: "" when there is none.
func (n *Node) UnitLog(h *testhosts.Host, unit string) string {
	b, err := h.ReadFile("/var/log/units/" + unit + ".service.log")
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return "\n" + unit + " log:\n" + string(b)
}
