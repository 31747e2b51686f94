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
// A host reboots as a machine does (`sudo -n systemctl reboot`, reboot,
// shutdown -r now on the host, or Reboot): the command returns, a moment
// later every process of the host ends (its sshd, PID 1 of its
// namespace, is told to end; SSH sessions drop), and the harness boots it
// again on the same address with the same host key and disk: a new boot
// ID (/proc/sys/kernel/random/boot_id inside, a bind mount; the
// machine's own is untouched), fresh /run and /tmp, and the units its
// targets want started. A host given an OS family (Options.OS: debian,
// fedora-coreos, flatcar) has that OS's /etc/os-release and update tool
// (apt-get/apt-mark, rpm-ostree, update_engine_client stand-ins); the
// test offers an update (OfferUpdate), the tool stages it, and the next
// boot runs it. A Debian host's booted kernel release shows in
// /proc/sys/kernel/osrelease (a bind mount); uname -r stays the
// machine's. Close ends every host, rebooting ones too.
//
// It is test infrastructure: it needs root, and must never be pointed at
// real hosts.
package testhosts
