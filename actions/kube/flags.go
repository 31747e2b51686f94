package kube

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// FlagAt is a command-line flag of a static pod's container, where the
// manifest writes it.
type FlagAt struct {
	Container string
	Flag      string // without dashes or value: "insecure-port"
	Line      int
}

// ManifestFlags lists the flags in the command and args of each container
// of a static pod manifest (YAML), with their lines.
func ManifestFlags(manifest []byte) ([]FlagAt, error) {
	var pod struct {
		Spec struct {
			Containers []struct {
				Name    string      `yaml:"name"`
				Command []yaml.Node `yaml:"command"`
				Args    []yaml.Node `yaml:"args"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(manifest, &pod); err != nil {
		return nil, fmt.Errorf("not a pod manifest: %w", err)
	}
	var flags []FlagAt
	for _, c := range pod.Spec.Containers {
		for _, n := range append(c.Command, c.Args...) {
			arg, ok := strings.CutPrefix(n.Value, "-")
			if !ok || n.Kind != yaml.ScalarNode {
				continue
			}
			arg = strings.TrimPrefix(arg, "-")
			name, _, _ := strings.Cut(arg, "=")
			if name == "" {
				continue
			}
			flags = append(flags, FlagAt{Container: c.Name, Flag: name, Line: n.Line})
		}
	}
	return flags, nil
}

// RemovedFlags are the flags of each component that a minor no longer
// accepts (its binary refuses to start with them), keyed by that minor:
// what an upgrade to it must take out of a manifest first. Checked
// against the real binaries of both minors by the integration tests.
var RemovedFlags = map[string]map[string][]string{}

// FlagsRemovedBy names each flag of a component's manifest (file) that
// target no longer accepts, as "FILE:LINE: --FLAG ...": empty when the
// manifest may run on target as it is.
func FlagsRemovedBy(target Version, component, file string, manifest []byte) ([]string, error) {
	removed := RemovedFlags[target.MinorString()][component]
	if len(removed) == 0 {
		return nil, nil
	}
	flags, err := ManifestFlags(manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []string
	for _, f := range flags {
		for _, r := range removed {
			if f.Flag == r {
				out = append(out, fmt.Sprintf("%s:%d: --%s was removed from %s in %s", file, f.Line, f.Flag, component, target.MinorString()))
			}
		}
	}
	return out, nil
}
