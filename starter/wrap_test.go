package starter

import (
	"slices"
	"testing"
)

// A prompt's lines keep their columns (a plan's diff stays a diff); only
// a line too long is broken at spaces.
func TestWrapKeepsTheLinesOfAPrompt(t *testing.T) {
	prompt := "Upgrade lab to v1.36.3? A long sentence that does not fit in the width given here.\n" +
		"c1 kube-apiserver: a → b\n\n" +
		"--- c1:/etc/kubernetes/manifests/kube-apiserver.yaml\n" +
		"-    image: a\n" +
		"+    image: b\n"
	want := []string{
		"Upgrade lab to v1.36.3? A long sentence that does",
		"not fit in the width given here.",
		"c1 kube-apiserver: a → b",
		"",
		"--- c1:/etc/kubernetes/manifests/kube-apiserver.yaml",
		"-    image: a",
		"+    image: b",
	}
	if got := wrap(prompt, 52); !slices.Equal(got, want) {
		t.Errorf("wrap:\n%q\nwant\n%q", got, want)
	}
}
