// Package controlplane starts a real Kubernetes control plane on loopback
// for Kedge's tests and lab: etcd, kube-apiserver (Node+RBAC authorization,
// NodeRestriction, bootstrap-token authentication), kube-controller-manager
// (CSR signing, bootstrapsigner, tokencleaner) and kube-scheduler, built
// from the Go module proxy by scripts/kube-tools.sh, with a PKI generated
// for the run.
//
// It is test infrastructure; it must never be used for a real cluster.
package controlplane
