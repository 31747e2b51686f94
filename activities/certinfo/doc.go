// Package certinfo reads certificates where they are used: tls.check asks
// a TLS endpoint (an API server, etcd, a kubelet) which certificate it
// serves, and Parse reads the certificates of a PEM file or of a
// kubeconfig's embedded client certificate. Both say whether a
// certificate is due for renewal: whether it ends within a threshold.
//
// tls.check's name and its input and result types are declared in
// kedge.dev/kedge/actions/certinfo (pure data); the ones here are aliases.
package certinfo
