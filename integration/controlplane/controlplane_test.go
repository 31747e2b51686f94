package controlplane

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestControlPlaneServesAndSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	ctx := context.Background()
	cp, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	v, err := cp.Client.Discovery().ServerVersion()
	if err != nil || v.GitVersion != "v1.35.4" {
		t.Fatalf("server version %v %v", v, err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a node as admin: %v", err)
	}
	// The controller-manager runs: the bootstrap signer publishes the
	// cluster-info ConfigMap in kube-public.
	if _, err := cp.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
		t.Errorf("controller-manager did not publish kube-root-ca.crt: %v", err)
	}
}
