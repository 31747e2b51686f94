package nodefiles

import (
	"errors"
	"os"
	"strings"
	"testing"

	"kedge.dev/kedge/actions/render"
)

// An upgrade's manifest: Typhoon's (as terraform-render-bootstrap
// renders it) and Kedge's, each with only its image changed.
func TestSetImageChangesTheImageAlone(t *testing.T) {
	for goldenName, src := range map[string]string{
		"set-image-typhoon-kube-apiserver.yaml": "../../integration/typhoon/tftemplate/testdata/static-manifests-kube-apiserver.yaml.golden",
		"set-image-kedge-kube-apiserver.yaml":   "testdata/kube-apiserver.yaml.golden",
	} {
		before, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		res, err := SetImage(render.SetImageInput{Manifest: string(before), Image: "registry.k8s.io/kube-apiserver:v1.36.3"})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if !res.Changed || !strings.HasSuffix(res.Previous, "/kube-apiserver:v1.35.4") {
			t.Errorf("%s: %+v", src, res)
		}
		golden(t, goldenName, []byte(res.Content))
		// The one line that changed is the image's.
		a, b := strings.Split(string(before), "\n"), strings.Split(res.Content, "\n")
		diff := 0
		for i := range a {
			if a[i] != b[i] {
				diff++
				if !strings.Contains(b[i], "image: registry.k8s.io/kube-apiserver:v1.36.3") {
					t.Errorf("%s: line %d changed to %q", src, i+1, b[i])
				}
			}
		}
		if diff != 1 || len(a) != len(b) {
			t.Errorf("%s: %d lines changed, %d -> %d lines", src, diff, len(a), len(b))
		}
		// Setting it again changes nothing.
		again, err := SetImage(render.SetImageInput{Manifest: res.Content, Image: "registry.k8s.io/kube-apiserver:v1.36.3"})
		if err != nil || again.Changed || again.Content != res.Content {
			t.Errorf("%s: again: %+v %v", src, again.Changed, err)
		}
	}
}

// With a tag, the manifest's own repository is kept: a cluster that pulls
// from a mirror keeps pulling from it.
func TestSetImageTagKeepsTheRepository(t *testing.T) {
	m := "spec:\n  containers:\n  - name: kube-apiserver\n    image: mirror.example:5000/k8s/kube-apiserver:v1.35.4@sha256:" + strings.Repeat("ab", 32) + "\n"
	res, err := SetImage(render.SetImageInput{Manifest: m, Tag: "v1.36.3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "    image: mirror.example:5000/k8s/kube-apiserver:v1.36.3\n"; !strings.HasSuffix(res.Content, want) || !res.Changed || res.Image != "mirror.example:5000/k8s/kube-apiserver:v1.36.3" {
		t.Errorf("got %q", res.Content)
	}
	if got := Retag("mirror.example:5000/kube-scheduler", "v1.36.3"); got != "mirror.example:5000/kube-scheduler:v1.36.3" {
		t.Errorf("a registry port taken for a tag: %s", got)
	}
}

func TestSetImageKeepsQuotesCommentsAndOtherContainers(t *testing.T) {
	const two = `apiVersion: v1
kind: Pod
metadata: {name: etcd}
spec:
  containers:
  - name: sidecar
    image: "busybox:1.36" # the helper
  - name: etcd
    image: 'quay.io/coreos/etcd:v3.5.13'   # pinned
    command: [etcd]
`
	res, err := SetImage(render.SetImageInput{Manifest: two, Container: "etcd", Image: "quay.io/coreos/etcd:v3.5.21"})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(two, "'quay.io/coreos/etcd:v3.5.13'", "quay.io/coreos/etcd:v3.5.21", 1); res.Content != want || res.Previous != "quay.io/coreos/etcd:v3.5.13" {
		t.Errorf("got\n%s\nprevious %q", res.Content, res.Previous)
	}
	res, err = SetImage(render.SetImageInput{Manifest: two, Container: "sidecar", Image: "busybox:1.37"})
	if err != nil || !strings.Contains(res.Content, "    image: busybox:1.37 # the helper\n") {
		t.Errorf("%v\n%s", err, res.Content)
	}
}

func TestSetImageRefusesWhatItCannotRewrite(t *testing.T) {
	const two = "spec:\n  containers:\n  - name: a\n    image: x:1\n  - name: b\n    image: y:1\n"
	for name, c := range map[string]struct {
		in   render.SetImageInput
		want string
	}{
		"no image":           {render.SetImageInput{Manifest: two}, "image: is required"},
		"image and tag":      {render.SetImageInput{Manifest: two, Container: "a", Image: "x:2", Tag: "v2"}, "one or the other"},
		"a bad tag":          {render.SetImageInput{Manifest: two, Container: "a", Tag: "v1; reboot"}, "not an image tag"},
		"an untagged image":  {render.SetImageInput{Manifest: two, Container: "a", Image: "x"}, "needs a tag or a digest"},
		"a bad image":        {render.SetImageInput{Manifest: two, Container: "a", Image: "x:1; rm -rf /"}, "not an image reference"},
		"which container":    {render.SetImageInput{Manifest: two, Image: "x:2"}, "containers a, b: name one"},
		"no such container":  {render.SetImageInput{Manifest: two, Container: "c", Image: "x:2"}, `"c" is not a container of the pod (it has a, b)`},
		"not a pod":          {render.SetImageInput{Manifest: "kind: ConfigMap\n", Image: "x:2"}, "no spec.containers"},
		"not YAML":           {render.SetImageInput{Manifest: "spec: [", Image: "x:2"}, "not YAML"},
		"an escaped quote":   {render.SetImageInput{Manifest: "spec:\n  containers:\n  - name: a\n    image: \"x:\\u0031\"\n", Image: "x:2"}, "quoted image"},
		"an image on a flow": {render.SetImageInput{Manifest: "spec:\n  containers: [{name: a, image: x:1}, {name: b, image: x:1}]\n", Container: "a", Image: "x:2"}, "flow mapping"},
	} {
		_, err := SetImage(c.in)
		var fe *FieldError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a field error saying %q", name, err, c.want)
		}
	}
}
