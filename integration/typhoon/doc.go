// Package typhoon writes the host files of a Typhoon-built cluster for
// Kedge's test world: what Typhoon's butane templates for Flatcar Linux
// (a kubelet started by `docker run -d` in ExecStartPre) and Fedora
// CoreOS (`podman run` in ExecStart) and terraform-render-bootstrap put on
// controllers and workers — kubelet.service and kubelet.path,
// etcd-member.service with /etc/etcd/etcd.env and its own CA under
// /etc/ssl/etcd, /etc/kubernetes/{kubeconfig,kubelet.yaml,pki/...}, the
// static pods under Typhoon's file names and Typhoon's cluster DNS
// (10.3.0.10). The files are Kedge's own rendering of the facts in those
// templates, not copies: they let tests check that Kedge reads and
// operates a cluster it did not build.
//
// It is test infrastructure only.
package typhoon
