package kube

import (
	"strings"
	"testing"
)

func TestKubeletSkew(t *testing.T) {
	apis := []Running{
		{Component: APIServer, Host: "c1", Version: "v1.36.3", From: "image of pod kube-system/kube-apiserver-c1"},
		{Component: APIServer, Host: "c2", Version: "v1.35.4", From: "image of pod kube-system/kube-apiserver-c2"},
		{Component: APIServer, Host: "(the cluster's API)", Version: "v1.36.3", From: "/version"},
	}
	for name, tc := range map[string]struct {
		kubelet string
		apis    []Running
		want    string // "" when allowed
	}{
		"the same minor":              {"v1.35.9", apis, ""},
		"older, within three minors":  {"v1.32.0", apis, ""},
		"newer than the oldest":       {"v1.36.3", apis, "the kubelet v1.36.3 for w1 is newer than kube-apiserver v1.35.4 on c2 (image of pod kube-system/kube-apiserver-c2)"},
		"a newer minor than any":      {"v1.37.0", apis, "newer than kube-apiserver v1.35.4 on c2"},
		"four minors behind":          {"v1.31.14", apis, "is 4 minors behind kube-apiserver v1.35.4 on c2"},
		"a distribution's build":      {"v1.35.4+k3s1", apis, ""},
		"not a version":               {"latest", apis, `the kubelet for w1: "latest" is not a Kubernetes version`},
		"no API server":               {"v1.35.4", nil, "no kube-apiserver was found"},
		"an API server of no version": {"v1.35.4", append([]Running{{Component: APIServer, Host: "c3", Version: "dev", From: "image x"}}, apis...), `kube-apiserver on c3 (image x): "dev" is not`},
	} {
		t.Run(name, func(t *testing.T) {
			got := strings.Join(KubeletSkew("w1", tc.kubelet, tc.apis), "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("KubeletSkew(%s) = %q, want %q", tc.kubelet, got, tc.want)
			}
		})
	}
}
