package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/activities/nodefiles"
)

// KubeletUnitArgs reads kubelet.service as Kedge renders it
// (render.KubeletUnit), with any drop-ins after it, the way systemd would:
// the last ExecStart, its line continuations joined, split into words,
// ${VAR} and $VAR expanded from the Environment= settings (a later one
// wins). It returns the kubelet image, the word that was
// ${KUBELET_IMAGE}, and the words after it: the arguments the image's
// entrypoint, the kubelet, is given.
func KubeletUnitArgs(files ...[]byte) (image string, args []string, err error) {
	env := map[string]string{}
	var execStart string
	for _, f := range files {
		opts, err := unit.DeserializeOptions(bytes.NewReader(f))
		if err != nil {
			return "", nil, fmt.Errorf("kubelet unit: %w", err)
		}
		for _, o := range opts {
			if o.Section != "Service" {
				continue
			}
			switch o.Name {
			case "Environment":
				words, err := layout.SplitWords(o.Value)
				if err != nil {
					return "", nil, fmt.Errorf("kubelet unit: environment %q: %w", o.Value, err)
				}
				for _, w := range words {
					if k, v, ok := strings.Cut(w, "="); ok {
						env[k] = v
					}
				}
			case "ExecStart":
				execStart = o.Value // an empty one resets, a later one replaces
			}
		}
	}
	if strings.TrimSpace(execStart) == "" {
		return "", nil, errors.New("kubelet unit: no ExecStart")
	}
	words, err := layout.SplitWords(strings.ReplaceAll(execStart, "\\\n", " "))
	if err != nil {
		return "", nil, fmt.Errorf("ExecStart: %w", err)
	}
	marker := "${" + nodefiles.KubeletImageVariable + "}"
	for i, w := range words {
		if w != marker {
			continue
		}
		image, ok := env[nodefiles.KubeletImageVariable]
		if !ok || image == "" {
			return "", nil, fmt.Errorf("kubelet unit: %s is not set", nodefiles.KubeletImageVariable)
		}
		for _, a := range words[i+1:] {
			expanded, err := layout.Expand(a, env)
			if err != nil {
				return "", nil, err
			}
			args = append(args, expanded...)
		}
		return image, args, nil
	}
	return "", nil, fmt.Errorf("kubelet unit: ExecStart does not run %s", marker)
}

// KubeletUnitDirs returns the directories the unit's ExecStartPre
// "mkdir -p" lines make before the kubelet starts: a test that runs the
// ExecStart arguments itself prepares the node the same way.
func KubeletUnitDirs(files ...[]byte) ([]string, error) {
	var dirs []string
	for _, f := range files {
		opts, err := unit.DeserializeOptions(bytes.NewReader(f))
		if err != nil {
			return nil, fmt.Errorf("kubelet unit: %w", err)
		}
		for _, o := range opts {
			if o.Section != "Service" || o.Name != "ExecStartPre" {
				continue
			}
			words, err := layout.SplitWords(strings.TrimPrefix(o.Value, "-"))
			if err != nil {
				return nil, fmt.Errorf("ExecStartPre: %w", err)
			}
			if len(words) > 2 && words[0] == "/bin/mkdir" && words[1] == "-p" {
				dirs = append(dirs, words[2:]...)
			}
		}
	}
	return dirs, nil
}
