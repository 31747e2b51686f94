// Package tlsprobe holds tls.check, which asks a TLS endpoint (an API
// server, etcd, a kubelet) which certificate it serves and whether it is
// due for renewal: whether it ends within a threshold. Reading and
// describing certificates is internal/certfile's, shared with
// host.cert-info. certinfo.scan-ca asks many endpoints which of the CAs
// given signed what they present (a CA rotation's check that an old CA is
// presented nowhere before it is dropped).
//
// tls.check's and certinfo.scan-ca's names and their input and result
// types are declared in kedge.dev/kedge/actions/certinfo (pure data),
// which this package imports under its own name.
package tlsprobe
