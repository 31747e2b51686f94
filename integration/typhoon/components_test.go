package typhoon

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// Typhoon's default components are rendered as manifests.tf and
// conditional.tf render them: CoreDNS (a replica per etcd server, at
// least two; the cluster DNS address) and Cilium (agent DaemonSet and
// operator Deployment at variables.tf's images, the pod CIDR), no
// kube-proxy; every document decodes as the API's.
func TestComponentsAsTyphoonRendersThem(t *testing.T) {
	p, err := NewPKI(Cluster{Name: "c", APIServer: "api.example.com", EtcdServers: []string{"c1.example.com", "c2.example.com", "c3.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	assets, err := p.Assets()
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]any{}
	for name, data := range assets {
		if !strings.HasPrefix(name, "manifests/coredns/") && !strings.HasPrefix(name, "manifests/network/") {
			continue
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			objs[gvk.Kind+"/"+nameOf(obj)] = obj
		}
	}
	if _, ok := assets["manifests/kube-proxy/kube-proxy.yaml"]; ok {
		t.Error("kube-proxy rendered beside Cilium")
	}
	dns, ok := objs["Deployment/coredns"].(*appsv1.Deployment)
	if !ok || *dns.Spec.Replicas != 3 || dns.Spec.Template.Spec.Containers[0].Image != "registry.k8s.io/coredns/coredns:v1.13.1" {
		t.Fatalf("coredns: %+v", objs["Deployment/coredns"])
	}
	if svc, ok := objs["Service/coredns"].(*corev1.Service); !ok || svc.Spec.ClusterIP != ClusterDNS {
		t.Errorf("coredns service: %+v", objs["Service/coredns"])
	}
	agent, ok := objs["DaemonSet/cilium"].(*appsv1.DaemonSet)
	if !ok || agent.Spec.Template.Spec.Containers[0].Image != "quay.io/cilium/cilium:v1.18.4" || !agent.Spec.Template.Spec.HostNetwork {
		t.Fatalf("cilium: %+v", objs["DaemonSet/cilium"])
	}
	if op, ok := objs["Deployment/cilium-operator"].(*appsv1.Deployment); !ok || op.Spec.Template.Spec.Containers[0].Image != "quay.io/cilium/operator-generic:v1.18.4" {
		t.Errorf("cilium-operator: %+v", objs["Deployment/cilium-operator"])
	}
	if cm, ok := objs["ConfigMap/cilium"].(*corev1.ConfigMap); !ok || cm.Data["cluster-pool-ipv4-cidr"] != PodCIDR {
		t.Errorf("cilium config: %+v", objs["ConfigMap/cilium"])
	}
}

func nameOf(obj any) string {
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}
