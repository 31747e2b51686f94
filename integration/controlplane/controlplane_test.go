package controlplane

import (
	"context"
	"testing"
	"time"

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
	// The controller-manager runs: its root-CA publisher puts
	// kube-root-ca.crt in kube-public, in its own time (Start waited for
	// the default ServiceAccount, another controller's work).
	var err2 error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err2 = cp.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err2 == nil {
			return
		}
	}
	t.Errorf("controller-manager did not publish kube-root-ca.crt within a minute: %v", err2)
}
