package kubeapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
)

// Mid-upgrade, one API server runs the new release and /version may
// answer it: the kubelet is measured against the one still on the old.
func TestKubeletSkewReadsEveryAPIServer(t *testing.T) {
	a, cs := fakeActs()
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.36.3"}
	for node, tag := range map[string]string{"c1": "v1.36.3", "c2": "v1.35.4"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + node, Namespace: "kube-system"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:" + tag}}}}
		if _, err := cs.CoreV1().Pods("kube-system").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := a.KubeletSkew(context.Background(), kube.KubeletSkewInput{Node: "w1", KubeletVersion: "v1.35.4"})
	if err != nil || res.Oldest != "v1.35.4" || len(res.APIServers) != 3 {
		t.Fatalf("a v1.35 kubelet: %v, %+v", err, res)
	}
	_, err = a.KubeletSkew(context.Background(), kube.KubeletSkewInput{Node: "w1", KubeletVersion: "v1.36.3"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, errtype.UpgradeRefused) || !app.NonRetryable() ||
		!strings.Contains(err.Error(), "the kubelet v1.36.3 for w1 is newer than kube-apiserver v1.35.4 on c2 (image registry.k8s.io/kube-apiserver:v1.35.4 of pod kube-system/kube-apiserver-c2)") {
		t.Fatalf("a v1.36 kubelet beside a v1.35 API server: %v", err)
	}
}
