// Package layout reads how a host runs Kubernetes and names it: the
// layout Kedge's own bootstrap writes, the two Typhoon writes (Flatcar
// Linux: a kubelet started with `docker run -d` in ExecStartPre; Fedora
// CoreOS: `podman run` in ExecStart; both with kubelet.path waiting for
// /etc/kubernetes/kubeconfig and etcd as etcd-member.service), a host with
// no kubelet at all, or one it does not know.
//
// Discover works from what systemd reports for the units (FragmentPath,
// DropInPaths, Environment) and from the files those units, the kubelet's
// configuration and the static pod manifests name, read through a Reader:
// nothing is assumed from a file name that the host itself can tell. It is
// pure: the host.layout action supplies the facts over SSH/SFTP, unit
// tests from a directory tree.
//
// Every built-in runbook discovers the layout first and refuses one it
// does not know before it changes anything.
package layout
