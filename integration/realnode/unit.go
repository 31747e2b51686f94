package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"kedge.dev/kedge/activities/render"
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
				words, err := splitWords(o.Value)
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
	words, err := splitWords(strings.ReplaceAll(execStart, "\\\n", " "))
	if err != nil {
		return "", nil, fmt.Errorf("ExecStart: %w", err)
	}
	marker := "${" + render.KubeletImageVariable + "}"
	for i, w := range words {
		if w != marker {
			continue
		}
		image, ok := env[render.KubeletImageVariable]
		if !ok || image == "" {
			return "", nil, fmt.Errorf("kubelet unit: %s is not set", render.KubeletImageVariable)
		}
		for _, a := range words[i+1:] {
			expanded, err := expand(a, env)
			if err != nil {
				return "", nil, err
			}
			args = append(args, expanded...)
		}
		return image, args, nil
	}
	return "", nil, fmt.Errorf("kubelet unit: ExecStart does not run %s", marker)
}

// splitWords splits a command line as systemd does: at unquoted
// whitespace, with "…" and '…' quoting and backslash escapes.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, inWord = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			w.WriteRune(rs[i])
			inWord = true
		case quote == 0 && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// expand replaces ${VAR} inside a word by its value, and a word that is
// $VAR by its value split at whitespace, as systemd's ExecStart does.
func expand(word string, env map[string]string) ([]string, error) {
	if name, ok := strings.CutPrefix(word, "$"); ok && !strings.HasPrefix(name, "{") {
		return strings.Fields(env[name]), nil
	}
	var b strings.Builder
	for {
		start := strings.Index(word, "${")
		if start < 0 {
			b.WriteString(word)
			return []string{b.String()}, nil
		}
		end := strings.Index(word[start:], "}")
		if end < 0 {
			return nil, fmt.Errorf("%q: unterminated ${", word)
		}
		b.WriteString(word[:start])
		b.WriteString(env[word[start+2:start+end]])
		word = word[start+end+1:]
	}
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
			words, err := splitWords(strings.TrimPrefix(o.Value, "-"))
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
