package kube

import (
	"strings"
	"testing"
)

func TestParseVersionReadsWhatClustersReport(t *testing.T) {
	for in, want := range map[string]Version{
		"v1.36.3":         {1, 36, 3, ""},
		"1.35.4":          {1, 35, 4, ""},
		"v1.35.4+k3s1":    {1, 35, 4, "+k3s1"},
		"v1.34.2-gke.100": {1, 34, 2, "-gke.100"},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "v1.36", "v1.36.x", "latest", "v1.036.3", "v1.-1.3", "v1.36.3.4", "vv1.36.3", "v1.+3.0"} {
		if v, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) = %+v, want an error", bad, v)
		}
	}
	if s := (Version{1, 36, 3, ""}).String(); s != "v1.36.3" {
		t.Errorf("String: %s", s)
	}
}

// A cluster as Kedge builds it at v1.35.4: one controller, two workers.
func cluster135() []Running {
	return []Running{
		{APIServer, "c1", "v1.35.4", "image of kube-apiserver.yaml"},
		{ControllerManager, "c1", "v1.35.4", "image of kube-controller-manager.yaml"},
		{Scheduler, "c1", "v1.35.4", "image of kube-scheduler.yaml"},
		{Kubelet, "c1", "v1.35.4", "Node c1"},
		{Kubelet, "w1", "v1.35.4", "Node w1"},
		{Kubelet, "w2", "v1.34.2", "Node w2"},
	}
}

func TestUpgradeSkewLetsTheNextMinorOrPatchStart(t *testing.T) {
	for _, target := range []string{"v1.36.3", "v1.36.0", "v1.35.4", "v1.35.6"} {
		if p := UpgradeSkew(target, cluster135()); len(p) != 0 {
			t.Errorf("to %s: %q", target, p)
		}
	}
	// Half way: one API server on v1.36 already; finishing is allowed.
	half := append(cluster135(), Running{APIServer, "c2", "v1.36.3", "image"}, Running{APIServer, "c3", "v1.35.4", "image"})
	if p := UpgradeSkew("v1.36.3", half); len(p) != 0 {
		t.Errorf("finishing a half-done upgrade: %q", p)
	}
}

// Each refusal names the host, the component, its version and the rule.
func TestUpgradeSkewRefusesWhatThePolicyForbids(t *testing.T) {
	with := func(extra ...Running) []Running { return append(cluster135(), extra...) }
	cases := []struct {
		name    string
		target  string
		running []Running
		want    []string
	}{
		{"a skipped minor", "v1.37.2", cluster135(), []string{"kube-apiserver on c1 runs v1.35.4", "would skip 1 minor", "to v1.36.x first"}},
		{"two skipped", "v1.38.0", cluster135(), []string{"would skip 2 minors"}},
		{"a downgrade", "v1.34.2", cluster135(), []string{"older minor", "does not downgrade"}},
		{"a patch back", "v1.35.2", cluster135(), []string{"kube-apiserver on c1 runs v1.35.4", "newer than v1.35.2"}},
		{"a kubelet newer than the target", "v1.36.3", with(Running{Kubelet, "w3", "v1.37.0", "Node w3"}),
			[]string{"kubelet on w3 runs v1.37.0 (Node w3)", "newer than v1.36.3", "never be newer than the API server"}},
		{"a kubelet newer than the API server now", "v1.36.3", with(Running{Kubelet, "w3", "v1.36.1", "Node w3"}),
			[]string{"kubelet on w3 runs v1.36.1", "newer than kube-apiserver on c1 (v1.35.4)"}},
		{"a kubelet four minors behind", "v1.36.3", with(Running{Kubelet, "w3", "v1.32.9", "Node w3"}),
			[]string{"kubelet on w3 runs v1.32.9", "4 minors behind v1.36.3", "at most 3"}},
		{"a controller manager newer than the API server", "v1.36.3", with(Running{ControllerManager, "c2", "v1.36.3", "image"}),
			[]string{"kube-controller-manager on c2", "must never be newer than the API servers"}},
		{"a scheduler two behind", "v1.36.3", with(Running{Scheduler, "c2", "v1.34.0", "image"}),
			[]string{"kube-scheduler on c2 runs v1.34.0", "2 minors behind v1.36.3"}},
		{"API servers two minors apart", "v1.35.4", with(Running{APIServer, "c2", "v1.33.1", "image"}),
			[]string{"by more than one minor"}},
		{"an unreadable version", "v1.36.3", with(Running{Kubelet, "w3", "devel", "Node w3"}),
			[]string{"kubelet on w3 (Node w3)", `"devel" is not a Kubernetes version`}},
		{"a bad target", "1.36", cluster135(), []string{"version:", `"1.36" is not a Kubernetes version`}},
		{"no API server", "v1.36.3", []Running{{Kubelet, "w1", "v1.35.4", "Node w1"}}, []string{"no kube-apiserver was found"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := UpgradeSkew(c.target, c.running)
			if len(p) != 1 {
				t.Fatalf("%d problems, want 1: %q", len(p), p)
			}
			for _, w := range c.want {
				if !strings.Contains(p[0], w) {
					t.Errorf("%q does not say %q", p[0], w)
				}
			}
		})
	}
}
