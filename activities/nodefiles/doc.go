// Package nodefiles renders the files Kedge puts onto hosts to make them
// Kubernetes nodes (seeds 000, 001, 004):
//
//   - KubeletConfig: the kubelet's KubeletConfiguration (KubeletConfigPath)
//   - Kubeconfig: a kubeconfig with the CA and credentials embedded, for
//     the bootstrap kubeconfig (a bootstrap token) or a component's client
//     certificate
//   - NewBootstrapToken: a bootstrap token and, by its Secret method, the
//     kube-system Secret that makes the API server accept it
//   - KubeletUnit: kubelet.service, the kubelet run as a container of
//     ${KUBELET_IMAGE} (its entrypoint is the kubelet: flags only), with
//     the mounts Typhoon's units give it. There is no unit that deletes
//     the Node on shutdown: since Kubernetes 1.13 a kubelet may not delete
//     its own Node (node-remove does it with the cluster's credentials).
//   - BridgeCNIConfig: the node's CNI network (a bridge, host-local
//     addresses from the node's share of the pod network), without which
//     the node stays NotReady
//   - StaticPods: the control plane (etcd, kube-apiserver,
//     kube-controller-manager, kube-scheduler) as static pod manifests for
//     ManifestsDir
//
// Where each file goes, and the paths the files name to each other, are the
// constants of paths.go.
//
// Every renderer is a pure function: the same input gives the same bytes,
// which golden files under testdata pin down (go test
// ./activities/nodefiles -update rewrites them). Renderers validate their
// input first and report every problem at once, each a *FieldError naming
// the field as spelled in JSON. Only NewBootstrapToken reads anything from
// outside, random bytes for the token, and it takes the time as an
// argument.
//
// This package must never do I/O: no files, no network, no clock, no
// environment. Writing the files is for the host activities, and anything
// it renders may be a credential (kubeconfigs, tokens): it never logs.
package nodefiles
