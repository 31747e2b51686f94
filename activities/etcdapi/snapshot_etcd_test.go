package etcdapi

import (
	"os"
	"testing"

	"kedge.dev/kedge/integration/etcdlab"
)

// realEtcd is one etcd member from the test world's tools (etcdlab),
// serving its clients over TLS with client certificates from its own CA.
type realEtcd struct {
	endpoint string
	caPEM    string
	issuer   fakeIssuer // client certificates from etcd's CA, as Vault issues them
	lab      *etcdlab.Etcd
}

// startEtcd starts etcd (the binary in $KEDGE_KUBE_TOOLS, built by
// scripts/kube-tools.sh) on loopback and waits until it has a leader.
func startEtcd(t *testing.T) *realEtcd {
	t.Helper()
	if os.Getenv("KEDGE_KUBE_TOOLS") == "" {
		t.Skip("KEDGE_KUBE_TOOLS is not set (export KEDGE_KUBE_TOOLS=$(bash scripts/kube-tools.sh)): these tests run a real etcd")
	}
	lab := etcdlab.Start(t, t.TempDir(), etcdlab.Options{Name: "m1"})
	return &realEtcd{endpoint: lab.Endpoint, caPEM: lab.CAPEM, issuer: fakeIssuer{cert: lab.ClientCertPEM, key: lab.ClientKeyPEM}, lab: lab}
}

// put writes a key through the gateway.
func (e *realEtcd) put(t *testing.T, key string, value []byte) {
	t.Helper()
	e.lab.Put(t, key, value)
}
