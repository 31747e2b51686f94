package kubeapi

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/errtype"
)

// upgradeWorld is a one-controller cluster as Kedge renders it at
// v1.35.4 (the render package's golden manifests), with two workers.
func upgradeWorld(t *testing.T, kubelets map[string]string) (*Activities, kube.UpgradePlanInput) {
	t.Helper()
	var nodes []*corev1.Node
	for name, v := range kubelets {
		nodes = append(nodes, node(name, true, v))
	}
	a, cs := fakeActs(nodes...)
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.35.4"}
	in := kube.UpgradePlanInput{Version: "v1.36.3", Manifests: map[string]map[string]kube.FileContent{},
		Layouts: map[string]kube.HostLayout{"c1": {StaticPods: map[string]string{}}}}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		data, err := os.ReadFile("../nodefiles/testdata/" + c + ".yaml.golden")
		if err != nil {
			t.Fatal(err)
		}
		in.Manifests[c] = map[string]kube.FileContent{"c1": {Content: string(data)}}
		in.Layouts["c1"].StaticPods[c] = "/etc/kubernetes/manifests/" + c + ".yaml"
	}
	for host, image := range map[string]string{"c1": "quay.io/poseidon/kubelet:v1.35.4", "w1": "quay.io/poseidon/kubelet:v1.35.4", "w2": "quay.io/poseidon/kubelet:v1.35.6-amd64"} {
		l := in.Layouts[host]
		l.Kubelet = &kube.KubeletLayout{Image: image}
		in.Layouts[host] = l
	}
	return a, in
}

func TestUpgradePlanSaysWhatChangesWhere(t *testing.T) {
	a, in := upgradeWorld(t, map[string]string{"c1": "v1.35.4", "w1": "v1.35.4", "w2": "v1.34.2"})
	c, _ := a.Clients(in.Cluster)
	if _, err := c.AppsV1().DaemonSets("kube-system").Create(context.Background(), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.35.4"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Kedge's layout, the inventory naming the release.
	l := in.Layouts["c1"]
	l.Kind, in.InventoryVersion = "kedge", "v1.36.3"
	in.Layouts["c1"] = l
	in.Etcd = []kube.EtcdMember{{Name: "c1", Version: "3.6.16"}}
	// The kubelets' drop-ins: c1 has Kedge's from before, w1 none yet.
	in.Layouts["c1"].Kubelet.ImageDropIn = "/etc/systemd/system/kubelet.service.d/10-image.conf"
	in.Layouts["w1"].Kubelet.ImageDropIn = "/etc/systemd/system/kubelet.service.d/10-image.conf"
	before, err := nodefiles.DropIn(map[string]string{"KUBELET_IMAGE": "quay.io/poseidon/kubelet:v1.35.4"})
	if err != nil {
		t.Fatal(err)
	}
	in.DropIns = map[string]kube.FileContent{"c1": {Content: before}}
	res, err := a.UpgradePlan(context.Background(), in)
	if err != nil {
		t.Fatalf("%v\n%+v", err, res.Problems)
	}
	if res.From != "v1.35.4" || res.To != "v1.36.3" || len(res.Problems) != 0 {
		t.Errorf("from %s to %s, problems %q", res.From, res.To, res.Problems)
	}
	if len(res.Controllers) != 1 || len(res.Controllers[0].Manifests) != 3 {
		t.Fatalf("controllers: %+v", res.Controllers)
	}
	for _, m := range res.Controllers[0].Manifests {
		want := "images.example/" + m.Component + ":v1.36.3"
		if m.To != want || m.From != "images.example/"+m.Component+":v1.35.4" || !strings.Contains(m.Content, "image: "+want+"\n") {
			t.Errorf("%s: %s -> %s", m.Component, m.From, m.To)
		}
	}
	for _, line := range []string{
		"--- c1:/etc/kubernetes/manifests/kube-apiserver.yaml",
		"-    image: images.example/kube-apiserver:v1.35.4",
		"+    image: images.example/kube-apiserver:v1.36.3",
		"+    image: images.example/kube-scheduler:v1.36.3",
	} {
		if !strings.Contains(res.Diff, line+"\n") {
			t.Errorf("the diff has no line %q:\n%s", line, res.Diff)
		}
	}
	if res.KubeletImage != "quay.io/poseidon/kubelet:v1.36.3" {
		t.Errorf("kubelet image %s", res.KubeletImage)
	}
	// Each kubelet's drop-in as the swap will write it: changed where
	// there was one, new where there was none, none where Kedge was not
	// told where it is (w2).
	for _, want := range []string{
		"--- c1:/etc/systemd/system/kubelet.service.d/10-image.conf\n+++ c1:/etc/systemd/system/kubelet.service.d/10-image.conf\n@@ -1,4 +1,4 @@\n" +
			" # Written by Kedge. Remove this file (and daemon-reload) to go back to the unit's defaults.\n [Service]\n" +
			"-Environment=\"KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.35.4\"\n+Environment=\"KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.36.3\"\n",
		"--- w1:/etc/systemd/system/kubelet.service.d/10-image.conf\n+++ w1:/etc/systemd/system/kubelet.service.d/10-image.conf\n@@ -0,0 +1,4 @@\n",
	} {
		if !strings.Contains(res.Diff, want) {
			t.Errorf("the diff has no\n%s\nin:\n%s", want, res.Diff)
		}
	}
	if strings.Contains(res.Diff, "w2:") {
		t.Errorf("a diff for w2, whose drop-in was not given:\n%s", res.Diff)
	}
	// What containerd must hold first: the controller's static pods'
	// images, kube-proxy's everywhere.
	if got := strings.Join(res.CRIImages["c1"], " "); got != "images.example/kube-apiserver:v1.36.3 images.example/kube-controller-manager:v1.36.3 images.example/kube-scheduler:v1.36.3 registry.k8s.io/kube-proxy:v1.36.3" {
		t.Errorf("c1's containerd pulls %s", got)
	}
	if got := strings.Join(res.CRIImages["w2"], " "); got != "registry.k8s.io/kube-proxy:v1.36.3" {
		t.Errorf("w2's containerd pulls %s", got)
	}
	if want := "v1.35.4 → v1.36.3\n" +
		"c1 kube-apiserver: images.example/kube-apiserver:v1.35.4 → images.example/kube-apiserver:v1.36.3\n" +
		"c1 kube-controller-manager: images.example/kube-controller-manager:v1.35.4 → images.example/kube-controller-manager:v1.36.3\n" +
		"c1 kube-scheduler: images.example/kube-scheduler:v1.35.4 → images.example/kube-scheduler:v1.36.3\n" +
		"kubelets: 3 of 3 Nodes behind → quay.io/poseidon/kubelet:v1.36.3\n" +
		"etcd: 3.6.16 on 1 member(s), kept (v1.36.3 needs 3.5 or newer)"; res.Summary != want {
		t.Errorf("summary:\n%s\nwant:\n%s", res.Summary, want)
	}
	if got := strings.Join(res.Images["c1"], " "); got != "images.example/kube-apiserver:v1.36.3 images.example/kube-controller-manager:v1.36.3 images.example/kube-scheduler:v1.36.3 quay.io/poseidon/kubelet:v1.36.3" {
		t.Errorf("c1 pulls %s", got)
	}
	if got := strings.Join(res.Images["w2"], " "); got != "quay.io/poseidon/kubelet:v1.36.3" {
		t.Errorf("w2 pulls %s", got)
	}
	found := map[string]bool{}
	for _, r := range res.Running {
		found[r.Component+"@"+r.Host+"="+r.Version] = true
	}
	for _, want := range []string{"etcd@c1=3.6.16", "kubelet@w2=v1.34.2", "kube-proxy@DaemonSet kube-system/kube-proxy=v1.35.4", "kube-apiserver@(the cluster's API)=v1.35.4", "kube-scheduler@c1=v1.35.4"} {
		if !found[want] {
			t.Errorf("not found running: %s in %+v", want, res.Running)
		}
	}
	behind := 0
	for _, k := range res.Kubelets {
		if k.Behind {
			behind++
		}
	}
	if behind != 3 {
		t.Errorf("kubelets behind: %+v", res.Kubelets)
	}
}

// What the plan refuses, it refuses before anything changes, not
// retried, each problem named; the result still says what was found.
func TestUpgradePlanRefusesBeforeAnythingChanges(t *testing.T) {
	old := kube.RemovedFlags
	t.Cleanup(func() { kube.RemovedFlags = old })
	kube.RemovedFlags = map[string]map[string][]string{"v1.36": {kube.APIServer: {"kubelet-preferred-address-types"}}}
	for name, c := range map[string]struct {
		version  string
		kubelets map[string]string
		edit     func(*kube.UpgradePlanInput)
		want     string
	}{
		"a skipped minor": {"v1.37.2", nil, nil, "would skip 1 minor"},
		"Kedge's layout, the inventory's version old": {"v1.36.3", nil, func(in *kube.UpgradePlanInput) {
			l := in.Layouts["c1"]
			l.Kind, in.InventoryVersion = "kedge", "v1.35.4"
			in.Layouts["c1"] = l
		}, "c1 is of Kedge's layout, whose static pods Kedge renders from the inventory's kubernetes.version (v1.35.4): set it to v1.36.3 first"},
		"a kubelet newer": {"v1.36.3", map[string]string{"w9": "v1.37.0"}, nil, "kubelet on w9 runs v1.37.0"},
		"a removed flag": {"v1.36.3", nil, nil,
			"c1: /etc/kubernetes/manifests/kube-apiserver.yaml:29: --kubelet-preferred-address-types was removed from kube-apiserver in v1.36"},
		"no scheduler manifest": {"v1.36.3", nil, func(in *kube.UpgradePlanInput) { delete(in.Manifests["kube-scheduler"], "c1") }, "c1: no kube-scheduler manifest was read"},
		"etcd too old for the release": {"v1.36.3", nil, func(in *kube.UpgradePlanInput) {
			in.Etcd = []kube.EtcdMember{{Name: "c1", Version: "3.6.16"}, {Name: "c2", Version: "3.4.33"}}
		}, "etcd member c2 runs 3.4.33, and the API server of v1.36.3 needs etcd 3.5 or newer: upgrade etcd first"},
		"an image without a release": {"v1.36.3", nil, func(in *kube.UpgradePlanInput) {
			m := in.Manifests["kube-controller-manager"]["c1"]
			m.Content = strings.Replace(m.Content, "kube-controller-manager:v1.35.4", "kube-controller-manager:latest", 1)
			in.Manifests["kube-controller-manager"]["c1"] = m
		}, "has no release tag"},
		"a kubelet whose image drop-in the swap would not know": {"v1.36.3", nil, func(in *kube.UpgradePlanInput) {
			in.Layouts["w1"].Kubelet.ImageDropInRefused = "KUBELET_IMAGE is set in 20-site.conf among other settings"
		}, "w1: its kubelet could not be swapped to quay.io/poseidon/kubelet:v1.36.3: KUBELET_IMAGE is set in 20-site.conf among other settings"},
	} {
		t.Run(name, func(t *testing.T) {
			kubelets := map[string]string{"c1": "v1.35.4", "w1": "v1.35.4"}
			for k, v := range c.kubelets {
				kubelets[k] = v
			}
			a, in := upgradeWorld(t, kubelets)
			in.Version = c.version
			if name != "a removed flag" {
				m := in.Manifests["kube-apiserver"]["c1"]
				m.Content = strings.Replace(m.Content, "    - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname\n", "", 1)
				in.Manifests["kube-apiserver"]["c1"] = m
			}
			if c.edit != nil {
				c.edit(&in)
			}
			res, err := a.UpgradePlan(context.Background(), in)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || !errtype.Is(err, errtype.UpgradeRefused) || !app.NonRetryable() || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a non-retryable UpgradeRefused saying %q", err, c.want)
			}
			var details kube.UpgradePlanResult
			if err := app.Details(&details); err != nil || len(details.Problems) == 0 || len(details.Running) == 0 {
				t.Errorf("the refusal's details: %+v %v", details, err)
			}
			if len(res.Problems) == 0 {
				t.Errorf("no problems in the result")
			}
		})
	}
}

// On Typhoon's layout the plan says what the manifests become.
func TestUpgradePlanSaysWhatTyphoonsManifestsBecome(t *testing.T) {
	a, in := upgradeWorld(t, map[string]string{"c1": "v1.35.4", "w1": "v1.35.4"})
	m := in.Manifests["kube-apiserver"]["c1"]
	m.Content = strings.Replace(m.Content, "    - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname\n", "", 1)
	in.Manifests["kube-apiserver"]["c1"] = m
	l := in.Layouts["c1"]
	l.Kind = "typhoon-flatcar"
	in.Layouts["c1"] = l
	res, err := a.UpgradePlan(context.Background(), in)
	if err != nil || !strings.Contains(res.Summary, "\nmanifests: Typhoon's as each controller has them, the image tag changed and nothing else (Kedge holds no Typhoon release's templates for v1.36)") {
		t.Errorf("%v; summary:\n%s", err, res.Summary)
	}
}
