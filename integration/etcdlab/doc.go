// Package etcdlab starts a real one-member etcd on loopback for Kedge's
// tests and benchmarks: the etcd binary of the test world's Kubernetes
// tools ($KEDGE_KUBE_TOOLS, built by scripts/kube-tools.sh), serving its
// clients over TLS and requiring client certificates, as a cluster's etcd
// does.
//
// Start makes a CA of its own, a server certificate (server and client
// usages: etcd's gateway reaches its own gRPC server with it) and a client
// certificate, all for 127.0.0.1, in a new directory under the one the
// caller gives, and returns once the member answers with a leader. The
// Etcd it returns holds the endpoint, the CA (PEM, parsed and as a file),
// the client certificate and key (PEM and files), an *http.Client that
// presents them, and Call for JSON requests to etcd's gRPC gateway (/v3/...).
//
// Stopping is registered as a Cleanup of the test or benchmark: the
// process is killed and its directory removed, also when the test failed
// (the tail of etcd's log is logged first then).
//
// It is test infrastructure: its CA and keys are made for one test and
// thrown away; it must never hold anything that matters.
package etcdlab
