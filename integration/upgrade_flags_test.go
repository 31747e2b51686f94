package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/srcroot"
)

// The upgrade plan's table of removed flags is checked against the real
// binaries of both releases: each flag it says the next release removed
// is refused by that release's binary and taken by today's, and every
// flag of the manifests Kedge renders and Typhoon renders is taken by the
// next release unless the table lists it. A release that drops a flag
// the table misses fails here, not on a cluster half way through its
// upgrade.
func TestRemovedFlagsAreWhatTheNextReleaseRefuses(t *testing.T) {
	mainLane.join(t)
	now, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	next, err := controlplane.NextTools()
	if err != nil {
		t.Fatal(err)
	}
	target, err := kube.ParseVersion(controlplane.NextVersion)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(next, kube.APIServer), "--version").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "Kubernetes "+target.String() {
		t.Fatalf("the next release's kube-apiserver says %q (%v)", out, err)
	}
	root, err := srcroot.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{kube.APIServer, kube.ControllerManager, kube.Scheduler} {
		removed := kube.RemovedFlags[target.MinorString()][component]
		for _, f := range removed {
			switch {
			case !knows(t, filepath.Join(now, component), f):
				t.Errorf("%s of today's release does not know --%s either: not a flag %s removed", component, f, target)
			case knows(t, filepath.Join(next, component), f):
				t.Errorf("%s %s knows --%s, which the table says it removed", component, target, f)
			}
		}
		for _, file := range []string{
			filepath.Join(root, "activities/nodefiles/testdata", component+".yaml.golden"),
			filepath.Join(root, "activities/nodefiles/testdata", "listen-node-"+component+".yaml.golden"),
			filepath.Join(root, "integration/typhoon/tftemplate/testdata", "static-manifests-"+component+".yaml.golden"),
		} {
			args := manifestArgs(t, file, component)
			var kept []string
			for _, a := range args {
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if !slices.Contains(removed, name) {
					kept = append(kept, a)
				}
			}
			if len(kept) < 3 {
				t.Fatalf("%s: %d flags read", file, len(kept))
			}
			if err := accepts(t, filepath.Join(next, component), kept...); err != nil {
				t.Errorf("%s %s refuses the flags of %s, and the table of removed flags does not list them: %v", component, target, filepath.Base(file), err)
			}
		}
	}
}

// accepts runs a release's binary with args and --version: it parses
// every flag (an unknown one or a bad value fails) and exits before
// starting anything. Its error is the binary's own.
func accepts(t *testing.T, bin string, args ...string) error {
	t.Helper()
	out, err := exec.Command(bin, append(args, "--version")...).CombinedOutput()
	if err != nil {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "Error:") {
				return errors.New(l)
			}
		}
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// knows is whether a release's binary has the flag, whatever value it
// wants.
func knows(t *testing.T, bin, flag string) bool {
	t.Helper()
	err := accepts(t, bin, "--"+flag)
	return err == nil || !strings.Contains(err.Error(), "unknown flag: --"+flag)
}

// envRef is a $(VAR) the kubelet expands in a container's command.
var envRef = regexp.MustCompile(`\$\([A-Z_][A-Z0-9_]*\)`)

// manifestArgs are the flags of a static pod manifest's container, its
// $(VAR)s given an address.
func manifestArgs(t *testing.T, file, container string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pod struct {
		Spec struct {
			Containers []struct {
				Name    string   `yaml:"name"`
				Command []string `yaml:"command"`
				Args    []string `yaml:"args"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &pod); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var args []string
	for _, c := range pod.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, a := range append(c.Command, c.Args...) {
			if strings.HasPrefix(a, "-") {
				args = append(args, envRef.ReplaceAllString(a, "127.0.0.1"))
			}
		}
	}
	return args
}
