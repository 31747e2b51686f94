// Package realnode runs real Kubernetes nodes in Kedge's test world: the
// real kubelet (built by scripts/kube-tools.sh) with its own containerd,
// registered with the real control plane of integration/controlplane,
// running pods from registry-free images (integration/images). Several
// can run at once on one machine; each is a Node.
//
// # What a node is
//
//   - Its own mount and network namespaces, kept by a holder process
//     (unshare). In the mount namespace, /etc, /var/lib, /var/log, /run
//     and /usr/libexec are covered by overlays whose upper layers are in
//     the node's Dir, and the paths the kubelet, containerd, runc and the
//     CNI plugins use at fixed places are bind mounts of Dir/fs/PATH:
//     /etc/kubernetes, /etc/cni/net.d, /var/lib/kubelet,
//     /var/lib/containerd, /var/lib/cni, /var/log/containers,
//     /var/log/pods, /run/containerd, /run/netns, /usr/libexec/kubernetes.
//     So the paths Kedge renders (render.KubeletConfigPath,
//     render.KubeletKubeconfigPath, render.ManifestsDir, containerd's
//     default socket) are real inside the node and lead to the node's own
//     files, which the test reads and writes through Node.Path and
//     Node.WriteFile.
//   - A veth pair: kedge-rnN on the machine with 10.201.N.1/24, eth0 in
//     the node with 10.201.N.2/24 (the node's InternalIP; a kubelet
//     refuses a loopback node IP) and its default route through the
//     machine. N is the first free link name, which the kernel hands out
//     once, so concurrent nodes never share one. A control plane started
//     with Host set to a node's HostIP is reachable from every node.
//   - Pods on a bridge (cni0) inside the node, addresses from
//     10.202.N.0/24 (host-local), with a route to them on the machine.
//   - containerd 1.6 (Debian's) configured for the node: state in its
//     private directories, the CRI plugin with the test world's pause
//     image, runc with cgroupfs, the machine's CNI plugins.
//   - The kubelet, authenticated as itself: JoinWithCertificate issues a
//     client certificate for system:node:NAME (organization system:nodes)
//     signed by the control plane's CA, never an admin one. Its
//     configuration is the one Kedge renders, changed by ForThisMachine
//     only where this machine needs it (cgroup v1, no systemd, a cgroupRoot
//     of its own: /kedge-realnode-N, made beforehand in every cgroup
//     hierarchy; eviction at 1% free disk and no image garbage collection
//     before the disk is full, since the nodes share the machine's disk:
//     EvictionHard, CheckEviction).
//
// # A node as an SSH test host
//
// StartSSH makes a node a host Kedge reaches like every test host: an
// sshd (a host testhosts.Prepare wrote, at the node's IP) inside the
// node's namespaces, where core logs in and becomes root with sudo, with
// the systemctl, docker and podman stand-ins, and this machine's kubelet
// settings (MachineDropIn: what ForThisMachine changes) as a drop-in in
// the kubelet's --config-dir, as a machine's provisioning would leave
// them. Kedge's own runbooks (node-join, bootstrap) can then join the
// node. InstallKubelet instead writes what node-join would (the node's
// certificate kubeconfig, Kedge's KubeletConfiguration as rendered,
// Kedge's rendered kubelet.service for docker or podman) and starts the
// unit: the container
// stand-in runs the real kubelet binary SetKubeletImages mapped to the
// image in KUBELET_IMAGE, with the unit's volumes. The sshd and all it
// starts run in CgroupRoot/ssh, where Close finds them (the kubelet's
// container has a mount namespace of its own).
//
// # What it changes on the machine, and how it is put back
//
// Close (registered with t.Cleanup by New, so it runs when a test fails
// too; it can be called again) undoes everything, in this order:
//
//   - the kubelets (SIGTERM, then SIGKILL), containerd, the shims and the
//     pods: every process in the node's mount namespace or in its cgroups
//     is killed until none is left;
//   - inside the node, every iptables rule and chain (KUBE-*, CNI-*: the
//     namespace started with none, so all of them are the kubelet's and
//     the CNI plugins'), the bridge, then the mounts, innermost first;
//   - the holder, and with it both namespaces (the veth dies with them;
//     the machine's side is deleted too if it is still there);
//   - the cgroups under the node's cgroupRoot, deepest first, in every
//     hierarchy;
//   - the sysctls a kubelet sets on the whole machine (KubeletSysctls:
//     vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, …), saved
//     before the first node of the process starts a kubelet and restored
//     when the last one closes.
//
// Close fails if iptables chains named KUBE-* or CNI-* appeared in the
// machine's own network namespace, or if a mount of the node's Dir is
// visible there: neither should ever happen.
//
// What it does not undo: a node whose test process was killed (SIGKILL)
// leaves its shims and pods running, since they are not the process's
// children; the next node given the same N removes that N's cgroups first.
//
// It needs root, and containerd, runc, the CNI plugins, iptables and
// iproute2 (scripts/deps.sh). It is test infrastructure: it must never be
// pointed at a real cluster or run on a machine that matters.
package realnode
