package nodefiles

import (
	"os"
	"testing"
)

func TestDropInGolden(t *testing.T) {
	got, err := DropIn(map[string]string{"KUBELET_IMAGE": "quay.io/poseidon/kubelet:v1.35.4", "A_FIRST": "x y"})
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/10-image.conf.golden"
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil || got != string(want) {
		t.Errorf("got\n%s\nwant\n%s (%v)", got, want, err)
	}
	if _, err := DropIn(map[string]string{"X": "a\"b"}); err == nil {
		t.Error("a quote in a value was accepted")
	}
}
