package imageref

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for s, want := range map[string]string{
		"quay.io/poseidon/kubelet:v1.35.4":          "",
		"registry.k8s.io/kube-proxy:v1.36.3":        "",
		"busybox@sha256:" + strings.Repeat("a", 64): "",
		"quay.io/poseidon/kubelet":                  "needs a tag or a digest",
		"quay.io/poseidon/kubelet:v1;rm -rf /":      "is not an image reference",
		"Quay.io/UPPER/name:1":                      "is not an image reference",
		"":                                          "is not an image reference",
		// Nothing a shell would read as more than one word: the
		// reference goes into host commands.
		" busybox:1.37":                       "is not an image reference",
		"busybox:1.37 ":                       "is not an image reference",
		"busybox :1.37":                       "is not an image reference",
		"busybox:1.37\n":                      "is not an image reference",
		"busybox:1.37\trm":                    "is not an image reference",
		"-busybox:1.37":                       "is not an image reference",
		"--privileged":                        "is not an image reference",
		"busybox:-1":                          "is not an image reference",
		"busybox:1.37&&id":                    "is not an image reference",
		"busybox:1.37|id":                     "is not an image reference",
		"busybox:$(id)":                       "is not an image reference",
		"busybox:`id`":                        "is not an image reference",
		"busybox:${IFS}":                      "is not an image reference",
		"busybox:1.37>/etc/passwd":            "is not an image reference",
		"'busybox:1.37'":                      "is not an image reference",
		"\"busybox:1.37\"":                    "is not an image reference",
		"busybox:1.37\\":                      "is not an image reference",
		"busybox:1.37*":                       "is not an image reference",
		"../busybox:1.37":                     "is not an image reference",
		"busybox@sha256:abc":                  "is not an image reference",
		"busybox:" + strings.Repeat("a", 129): "is not an image reference",
		"busybox:" + strings.Repeat("a", 128): "",
	} {
		err := Check(s)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Check(%q) = %v, want %q", s, err, want)
		}
	}
}

func TestFull(t *testing.T) {
	for s, want := range map[string]string{
		"busybox:1.37":                       "docker.io/library/busybox:1.37",
		"poseidon/kubelet:v1.35.4":           "docker.io/poseidon/kubelet:v1.35.4",
		"registry.k8s.io/kube-proxy:v1.36.3": "registry.k8s.io/kube-proxy:v1.36.3",
		"localhost:5000/x:1":                 "localhost:5000/x:1",
		"busybox":                            "",
	} {
		got, err := Full(s)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("Full(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
}
