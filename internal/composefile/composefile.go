package composefile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// File is a compose file.
type File struct {
	Name       string              `yaml:"name"`
	KedgeBuild Build               `yaml:"x-kedge-build"`
	Services   map[string]*Service `yaml:"services"`
	Volumes    map[string]any      `yaml:"volumes"`
}

// Build is a service's build section.
type Build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

// Service is one service.
type Service struct {
	Image       string                `yaml:"image"`
	Build       *Build                `yaml:"build"`
	User        string                `yaml:"user"`
	Restart     string                `yaml:"restart"`
	Entrypoint  []string              `yaml:"entrypoint"`
	Command     []string              `yaml:"command"`
	Environment map[string]string     `yaml:"environment"`
	Volumes     []string              `yaml:"volumes"`
	Ports       []string              `yaml:"ports"`
	Expose      []string              `yaml:"expose"`
	DependsOn   map[string]Dependency `yaml:"depends_on"`
	Healthcheck *Healthcheck          `yaml:"healthcheck"`
}

// Dependency is one entry of depends_on.
type Dependency struct {
	Condition string `yaml:"condition"`
}

// Healthcheck is a service's health check.
type Healthcheck struct {
	Test     []string `yaml:"test"`
	Interval string   `yaml:"interval"`
	Timeout  string   `yaml:"timeout"`
	Retries  int      `yaml:"retries"`
}

// The conditions of depends_on.
const (
	Started   = "service_started"
	Healthy   = "service_healthy"
	Completed = "service_completed_successfully"
)

// Load reads and strictly decodes a compose file.
func Load(file string) (*File, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(f.Services) == 0 {
		return nil, fmt.Errorf("%s: no services", file)
	}
	for name, s := range f.Services {
		for dep, d := range s.DependsOn {
			if f.Services[dep] == nil {
				return nil, fmt.Errorf("%s: service %s depends on %s, which is not a service", file, name, dep)
			}
			if d.Condition != Started && d.Condition != Healthy && d.Condition != Completed {
				return nil, fmt.Errorf("%s: service %s: depends_on %s: unknown condition %q", file, name, dep, d.Condition)
			}
		}
	}
	if _, err := f.Order(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &f, nil
}

// Order is the services in an order that starts each after what it
// depends on (by name among equals).
func (f *File) Order() ([]string, error) {
	var order []string
	done := map[string]bool{}
	for len(order) < len(f.Services) {
		var ready []string
		for name, s := range f.Services {
			if done[name] {
				continue
			}
			ok := true
			for dep := range s.DependsOn {
				ok = ok && done[dep]
			}
			if ok {
				ready = append(ready, name)
			}
		}
		if len(ready) == 0 {
			return nil, errors.New("depends_on has a cycle")
		}
		slices.Sort(ready)
		for _, name := range ready {
			done[name] = true
		}
		order = append(order, ready...)
	}
	return order, nil
}

var varRef = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}`)

// Ref is one ${NAME} or ${NAME:-Default} in a file.
type Ref struct{ Name, Default string }

// Refs are the variable references in s, in order.
func Refs(s string) []Ref {
	var refs []Ref
	for _, m := range varRef.FindAllStringSubmatch(s, -1) {
		refs = append(refs, Ref{m[1], m[2]})
	}
	return refs
}

// Interpolate expands ${VAR} and ${VAR:-default} as Compose does, taking
// variables from vars ("" and unset both give the default), and $$ to $.
// Any other use of $ is an error.
func Interpolate(s string, vars map[string]string) (string, error) {
	out := varRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		if v := vars[m[1]]; v != "" {
			return strings.ReplaceAll(v, "$", "$$")
		}
		return m[2]
	})
	if strings.Contains(strings.ReplaceAll(out, "$$", ""), "$") {
		return "", fmt.Errorf("unsupported interpolation in %q", s)
	}
	return strings.ReplaceAll(out, "$$", "$"), nil
}

// Mount is one volume of a service: a bind mount of a repository path
// (./...), of an operator's path (${VAR...}), or a named volume.
type Mount struct {
	Source, Target string
	Repo           bool // Source is a path in the repository (./...)
	Named          bool // Source is a named volume
	ReadOnly       bool
}

// Mounts parses a service's volumes (SOURCE:TARGET[:ro|rw]); sources are
// left uninterpolated.
func Mounts(s *Service) ([]Mount, error) {
	var ms []Mount
	for _, v := range s.Volumes {
		var parts []string
		if strings.HasPrefix(v, "${") && strings.Contains(v, "}") {
			// ${VAR...} or ${VAR...}/FILE, then :TARGET[:MODE].
			end := strings.Index(v, "}") + 1
			if i := strings.Index(v[end:], ":"); i >= 0 {
				end += i
			}
			parts = append([]string{v[:end]}, strings.Split(strings.TrimPrefix(v[end:], ":"), ":")...)
		} else {
			parts = strings.Split(v, ":")
		}
		if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
			return nil, fmt.Errorf("volume %q is not SOURCE:TARGET[:ro|rw]", v)
		}
		m := Mount{Source: parts[0], Target: parts[1], ReadOnly: len(parts) == 3 && parts[2] == "ro"}
		switch {
		case strings.HasPrefix(m.Source, "./"):
			m.Repo = true
		case strings.HasPrefix(m.Source, "${"):
		default:
			m.Named = true
		}
		if !path.IsAbs(m.Target) {
			return nil, fmt.Errorf("volume %q: target %q is not absolute", v, m.Target)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// Under finds the mount a container path lies under, and the path
// relative to the mount's target.
func Under(ms []Mount, p string) (Mount, string, bool) {
	for _, m := range ms {
		if p == m.Target || strings.HasPrefix(p, m.Target+"/") {
			return m, strings.TrimPrefix(strings.TrimPrefix(p, m.Target), "/"), true
		}
	}
	return Mount{}, "", false
}

// ImageName splits IMAGE[:TAG].
func ImageName(image string) (name, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, ""
	}
	return image[:i], image[i+1:]
}
