package kubeapi

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"kedge.dev/kedge/actions/kube"
)

// typhoonCorefile is the Corefile of Typhoon's CoreDNS ConfigMap
// (terraform-render-bootstrap resources/coredns/config.yaml, its cluster
// domain filled in).
const typhoonCorefile = `.:53 {
    errors
    health {
      lameduck 5s
    }
    ready
    log . {
        class error
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
}
`

func coreDNSCluster(image, corefile string) *fake.Clientset {
	return fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: image}}}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Data: map[string]string{"Corefile": corefile}},
	)
}

func TestPlanCoreDNS(t *testing.T) {
	v136, _ := kube.ParseVersion("v1.36.3")
	v137, _ := kube.ParseVersion("v1.37.0")
	ctx := context.Background()

	// Typhoon's CoreDNS: retagged the release kubeadm ships with v1.36,
	// its Corefile needing no change.
	ch, current, err := planCoreDNS(ctx, coreDNSCluster("registry.k8s.io/coredns/coredns:v1.13.1", typhoonCorefile), v136)
	if err != nil || ch == nil {
		t.Fatal(ch, err)
	}
	if ch.Kept != "" || ch.Tag != "v1.14.2" || ch.To != "registry.k8s.io/coredns/coredns:v1.14.2" || ch.Corefile != "" || current != typhoonCorefile {
		t.Errorf("Typhoon's CoreDNS to v1.36: %+v", ch)
	}
	// Docker Hub's tags have no v.
	ch, _, _ = planCoreDNS(ctx, coreDNSCluster("coredns/coredns:1.13.1", typhoonCorefile), v136)
	if ch.Tag != "1.14.2" || ch.To != "coredns/coredns:1.14.2" {
		t.Errorf("Docker Hub's CoreDNS: %+v", ch)
	}
	// A Corefile the migration changes (the kubernetes plugin's endpoint
	// takes one address since 1.7): migrated, for the ConfigMap.
	old := strings.Replace(typhoonCorefile, "        pods insecure\n", "        pods insecure\n        endpoint https://a https://b\n", 1)
	ch, current, err = planCoreDNS(ctx, coreDNSCluster("registry.k8s.io/coredns/coredns:v1.7.0", old), v136)
	if err != nil {
		t.Fatal(err)
	}
	if current != old || ch.Corefile == "" || !strings.Contains(ch.Corefile, "endpoint https://a\n") || ch.Kept != "" || ch.Tag != "v1.14.2" {
		t.Errorf("a Corefile with two endpoints: %+v", ch)
	}
	// What the migration cannot carry over: named, CoreDNS kept.
	old = strings.Replace(typhoonCorefile, "        pods insecure\n", "        pods insecure\n        upstream\n", 1)
	ch, _, _ = planCoreDNS(ctx, coreDNSCluster("registry.k8s.io/coredns/coredns:v1.6.7", old), v136)
	if want := `its Corefile holds what the migration to CoreDNS v1.14.2 cannot carry over: Option "upstream" in plugin "kubernetes" is unsupported`; !strings.HasPrefix(ch.Kept, want) || ch.Tag != "" {
		t.Errorf("a Corefile with upstream: %+v", ch)
	}

	for name, c := range map[string]struct {
		image string
		v     kube.Version
		kept  string
	}{
		"a release the table does not know": {"registry.k8s.io/coredns/coredns:v1.13.1", v137, "Kedge knows no CoreDNS release for v1.37"},
		"already there":                     {"registry.k8s.io/coredns/coredns:v1.14.2", v136, "it runs 1.14.2, the release v1.36 ships"},
		"newer":                             {"registry.k8s.io/coredns/coredns:v1.14.9", v136, "not a release its Corefile can be migrated from"},
		"no release tag":                    {"registry.k8s.io/coredns/coredns:latest", v136, "its image's tag is no CoreDNS release"},
	} {
		ch, _, err := planCoreDNS(ctx, coreDNSCluster(c.image, typhoonCorefile), c.v)
		if err != nil || ch == nil || !strings.Contains(ch.Kept, c.kept) || ch.Tag != "" || ch.To != c.image {
			t.Errorf("%s: %+v %v, want kept: %q", name, ch, err, c.kept)
		}
	}

	// No CoreDNS: nothing to do.
	if ch, _, err := planCoreDNS(ctx, fake.NewClientset(), v136); ch != nil || err != nil {
		t.Errorf("no CoreDNS: %+v %v", ch, err)
	}
}
