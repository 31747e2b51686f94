package sshhost

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/actions/layout"
)

func TestAnnotateKeepsThePodAndSetsTheAnnotation(t *testing.T) {
	const pod = `apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels:
    k8s-app: kube-apiserver
spec:
  hostNetwork: true
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.35.4
    command:
    - kube-apiserver
    - --advertise-address=$(POD_IP) # Typhoon's
`
	once, err := annotate([]byte(pod), layout.RestartedAtAnnotation, "2026-11-25T04:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	twice, err := annotate(once, layout.RestartedAtAnnotation, "2026-11-25T05:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	if err := yaml.Unmarshal([]byte(pod), &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(twice, &after); err != nil {
		t.Fatal(err)
	}
	meta := after["metadata"].(map[string]any)
	ann := meta["annotations"].(map[string]any)
	if len(ann) != 1 || ann[layout.RestartedAtAnnotation] != "2026-11-25T05:00:00Z" {
		t.Errorf("annotations %v", ann)
	}
	delete(meta, "annotations")
	if a, b := mustJSON(t, before), mustJSON(t, after); a != b {
		t.Errorf("the pod changed beyond the annotation:\n%s\n%s", a, b)
	}
	if !strings.Contains(string(twice), "# Typhoon's") {
		t.Errorf("comment lost:\n%s", twice)
	}

	for _, bad := range []string{"kind: Service\nmetadata: {}\n", "- a\n- b\n", "a: [\n"} {
		if _, err := annotate([]byte(bad), layout.RestartedAtAnnotation, "x"); err == nil {
			t.Errorf("annotate(%q) = nil error", bad)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
