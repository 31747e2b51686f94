package layout

import (
	"reflect"
	"testing"

	"kedge.dev/kedge/integration/typhoon"
)

// A Typhoon controller, rendered from Typhoon's own templates: where each
// CA is trusted, and which of those files is also the CSR signer's (so a
// rotation can never write a bundle there).
func TestTrustPointsOfATyphoonController(t *testing.T) {
	m, f := typhoonController(t, typhoon.Flatcar)
	l, err := Discover(f, m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]TrustPoint{
		CACluster: {
			{Path: "/etc/kubernetes/pki/ca.crt", Readers: []string{"kube-apiserver", "kube-controller-manager"}, Signer: true},
			{Path: "/etc/kubernetes/ca.crt", Readers: []string{"kubelet"}},
			{Path: "/etc/kubernetes/pki/controller-manager.conf", Kubeconfig: true, Readers: []string{"kube-controller-manager"}},
			{Path: "/etc/kubernetes/pki/scheduler.conf", Kubeconfig: true, Readers: []string{"kube-scheduler"}},
			{Path: "/etc/kubernetes/pki/admin.conf", Kubeconfig: true, Readers: []string{"kubectl"}},
			{Path: "/var/lib/kubelet/kubeconfig", Kubeconfig: true, Readers: []string{"kubelet"}},
			{Path: "/etc/kubernetes/kubeconfig", Kubeconfig: true, Readers: []string{"kubelet"}},
		},
		CAEtcd: {
			{Path: "/etc/ssl/etcd/etcd/server-ca.crt", Readers: []string{"etcd"}},
			{Path: "/etc/ssl/etcd/etcd/peer-ca.crt", Readers: []string{"etcd"}},
			{Path: "/etc/kubernetes/pki/etcd-client-ca.crt", Readers: []string{"kube-apiserver"}},
		},
		CAFrontProxy: {
			{Path: "/etc/kubernetes/pki/aggregation-ca.crt", Readers: []string{"kube-apiserver"}},
		},
	}
	for ca, w := range want {
		if got := l.TrustPoints(ca); !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", ca, got, w)
		}
	}
	if got := l.TrustPoints("service-account"); len(got) != 0 {
		t.Errorf("a key pair has no trust points here: %+v", got)
	}
}
