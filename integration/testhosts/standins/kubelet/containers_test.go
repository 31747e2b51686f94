package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const goldens = "../../../../activities/nodefiles/testdata/"

func writeImages(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "images")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readGolden(t *testing.T, name string) *staticPod {
	t.Helper()
	data, err := os.ReadFile(goldens + name)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := decodeManifest(data, "controller-2")
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return sp
}

func TestRenderedStaticPodsMapToTheirPrograms(t *testing.T) {
	images := writeImages(t,
		"# image prefix, program",
		"images.example/etcd /opt/kube/etcd",
		"images.example/kube-apiserver /opt/kube/kube-apiserver --v=0",
	)
	n := &node{name: "controller-2", ips: []string{"10.0.0.12"}}

	etcd := readGolden(t, "etcd.yaml.golden")
	if etcd.pod.Namespace != "kube-system" || etcd.pod.Name != "etcd" || etcd.key() != "kube-system_etcd" {
		t.Fatalf("etcd pod %s/%s", etcd.pod.Namespace, etcd.pod.Name)
	}
	p := containerProcess(etcd.pod.Spec.Containers[0], etcd.pod, n, images)
	if !p.mapped || p.argv[0] != "/opt/kube/etcd" || p.argv[1] != "--name=controller-2" ||
		p.argv[len(p.argv)-1] != "--peer-key-file=/etc/kubernetes/pki/etcd/peer.key" ||
		len(p.argv) != len(etcd.pod.Spec.Containers[0].Command) {
		t.Errorf("etcd argv %q", p.argv)
	}
	if !slices.Contains(p.env, "KEDGE_LAB_IMAGE=images.example/etcd:3.6.16-0") {
		t.Errorf("etcd env %q", p.env)
	}

	api := readGolden(t, "kube-apiserver.yaml.golden")
	p = containerProcess(api.pod.Spec.Containers[0], api.pod, n, images)
	if !p.mapped || !reflect.DeepEqual(p.argv[:3], []string{"/opt/kube/kube-apiserver", "--v=0", "--advertise-address=10.0.0.12"}) {
		t.Errorf("apiserver argv %q", p.argv)
	}

	sched := readGolden(t, "kube-scheduler.yaml.golden")
	p = containerProcess(sched.pod.Spec.Containers[0], sched.pod, n, images)
	if p.mapped || !reflect.DeepEqual(p.argv, sleepForever) {
		t.Errorf("an image not in the map sleeps, as under the container stand-in: %q", p.argv)
	}
}

func TestContainerProcessExpandsLikeTheKubelet(t *testing.T) {
	images := writeImages(t, "lab.example/tool /bin/echo")
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = "tool", "default"
	c := corev1.Container{
		Name: "tool", Image: "lab.example/tool:1",
		Command: []string{"tool", "--node=$(NODE)"},
		Args:    []string{"$(GREETING) $(UNSET)", "$$(GREETING)", "$(WHERE)"},
		Env: []corev1.EnvVar{
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "GREETING", Value: "hello"},
			{Name: "WHERE", Value: "$(GREETING) from $(NODE)"},
			{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
		},
	}
	p := containerProcess(c, pod, &node{name: "n1"}, images)
	want := []string{"/bin/echo", "--node=n1", "hello $(UNSET)", "$(GREETING)", "hello from n1"}
	if !reflect.DeepEqual(p.argv, want) {
		t.Errorf("argv %q, want %q", p.argv, want)
	}
	for _, e := range []string{"NODE=n1", "GREETING=hello", "WHERE=hello from n1"} {
		if !slices.Contains(p.env, e) {
			t.Errorf("env %q lacks %s", p.env, e)
		}
	}
	for _, e := range p.env {
		if strings.HasPrefix(e, "SECRET=") {
			t.Errorf("a secret reference cannot be resolved for a static pod: %q", e)
		}
	}
}

func TestManifestHashFollowsThePodNotTheFormatting(t *testing.T) {
	yamlPod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: kube-system}\nspec:\n  containers:\n  - name: c\n    image: x\n"
	jsonPod := `{"kind":"Pod","apiVersion":"v1","metadata":{"namespace":"kube-system","name":"p"},"spec":{"containers":[{"image":"x","name":"c"}]}}`
	a, err := decodeManifest([]byte(yamlPod), "n1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeManifest([]byte(jsonPod), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if a.hash != b.hash {
		t.Errorf("the same pod as YAML and JSON hashes %s and %s", a.hash, b.hash)
	}
	c, _ := decodeManifest([]byte(strings.Replace(yamlPod, "image: x", "image: y", 1)), "n1")
	if c.hash == a.hash {
		t.Error("a changed image keeps the hash")
	}
	d, _ := decodeManifest([]byte(strings.Replace(yamlPod, "namespace: kube-system", "namespace: ''", 1)), "n1")
	if d.pod.Namespace != "default" {
		t.Errorf("namespace defaults to default, got %q", d.pod.Namespace)
	}
	for _, bad := range []string{"", "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n", ": not yaml"} {
		if _, err := decodeManifest([]byte(bad), "n1"); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestManifestReaderTakesEveryVisibleFileLikeTheKubelet(t *testing.T) {
	dir := t.TempDir()
	pod := func(name, image string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: c, image: " + image + "}]}\n"
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", pod("a", "x"))
	write("a.yaml.bak", pod("a", "old"))   // same pod name: the first file wins
	write("b.manifest", pod("b", "x"))     // any name is a manifest
	write(".c.yaml.swp", pod("c", "x"))    // hidden files are not
	write("broken.yaml", "apiVersion: v1") // not a pod: reported
	r := manifestReader{dir: dir, nodeName: "n1"}
	pods, problems := r.read()
	if len(pods) != 2 || pods["default_a"] == nil || pods["default_b"] == nil || pods["default_a"].pod.Spec.Containers[0].Image != "x" {
		t.Errorf("pods %v", pods)
	}
	if len(problems) != 2 {
		t.Errorf("problems %v", problems)
	}
	if _, problems = r.read(); len(problems) != 0 {
		t.Errorf("problems are reported once: %v", problems)
	}
	// A manifest caught half-written keeps its pod.
	hash := pods["default_b"].hash
	write("b.manifest", "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c, ima")
	pods, problems = r.read()
	if pods["default_b"] == nil || pods["default_b"].hash != hash || len(problems) != 1 {
		t.Errorf("half-written: %v %v", pods, problems)
	}
	if err := os.Remove(filepath.Join(dir, "b.manifest")); err != nil {
		t.Fatal(err)
	}
	if pods, _ = r.read(); pods["default_b"] != nil {
		t.Error("a removed manifest keeps its pod")
	}
	r.dir = filepath.Join(dir, "missing")
	if pods, problems = r.read(); len(pods) != 0 || len(problems) != 0 {
		t.Errorf("a missing directory has no pods: %v %v", pods, problems)
	}
}
