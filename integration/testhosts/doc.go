// Package testhosts starts real OpenSSH hosts on loopback for Kedge's tests
// and local lab. Each host is an sshd in its own mount and PID namespace,
// listening on its own 127.x address, with its own host key, its own /etc,
// /var/lib and /var/log (overlays over the machine's), a clean /root and
// private /tmp and /run, and stand-in systemctl/docker programs that really
// start and stop processes. A ctr stand-in answers for containerd's k8s.io
// namespace from its own image store (CRIImageStore), except on hosts that
// run a real containerd (Options.RealContainerd). The hosts share the
// machine's kernel: their
// modprobe and sysctl stand-ins check what they are asked against it and
// record it on the host (/var/log/kedge-lab/modprobe.log,
// /var/lib/kedge-lab/sysctl.conf), never changing the kernel.
//
// It is test infrastructure: it needs root, and must never be pointed at
// real hosts.
package testhosts
