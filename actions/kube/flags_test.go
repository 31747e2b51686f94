package kube

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The flags of the manifests Kedge renders and Typhoon renders, with the
// lines the files give them.
func TestManifestFlagsReadsRenderedManifests(t *testing.T) {
	for file, want := range map[string]FlagAt{
		"../../activities/nodefiles/testdata/kube-apiserver.yaml.golden":                            {"kube-apiserver", "advertise-address", 14},
		"../../integration/typhoon/tftemplate/testdata/static-manifests-kube-apiserver.yaml.golden": {"kube-apiserver", "", 0},
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		flags, err := ManifestFlags(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(flags) < 10 {
			t.Fatalf("%s: %d flags: %+v", file, len(flags), flags)
		}
		lines := strings.Split(string(data), "\n")
		for _, f := range flags {
			if f.Container != want.Container {
				t.Errorf("%s: %+v: container", file, f)
			}
			if l := lines[f.Line-1]; !strings.Contains(l, "--"+f.Flag) {
				t.Errorf("%s:%d is %q, not --%s", file, f.Line, l, f.Flag)
			}
		}
		if want.Flag != "" && !slices.Contains(flags, want) {
			t.Errorf("%s: no %+v in %+v", file, want, flags)
		}
	}
	if _, err := ManifestFlags([]byte("spec: [")); err == nil {
		t.Error("a broken manifest was read")
	}
}

func TestFlagsRemovedByNamesTheFileAndLine(t *testing.T) {
	old := RemovedFlags
	t.Cleanup(func() { RemovedFlags = old })
	RemovedFlags = map[string]map[string][]string{"v1.36": {APIServer: {"kubelet-preferred-address-types"}}}
	data, err := os.ReadFile("../../activities/nodefiles/testdata/kube-apiserver.yaml.golden")
	if err != nil {
		t.Fatal(err)
	}
	v136, _ := ParseVersion("v1.36.3")
	got, err := FlagsRemovedBy(v136, APIServer, "/etc/kubernetes/manifests/kube-apiserver.yaml", data)
	want := []string{"/etc/kubernetes/manifests/kube-apiserver.yaml:29: --kubelet-preferred-address-types was removed from kube-apiserver in v1.36"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if got, _ := FlagsRemovedBy(v136, Scheduler, "kube-scheduler.yaml", data); len(got) != 0 {
		t.Errorf("another component's removals: %q", got)
	}
	v135, _ := ParseVersion("v1.35.6")
	if got, _ := FlagsRemovedBy(v135, APIServer, "kube-apiserver.yaml", data); len(got) != 0 {
		t.Errorf("another minor's removals: %q", got)
	}
}
