package runbooks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"
)

// Library finds runbooks by name: first in Dirs (NAME.yaml or NAME.yml),
// then in Builtin (the runbooks shipped with Kedge).
type Library struct {
	Dirs    []string
	Builtin fs.FS
}

// Loaded is a validated runbook with every runbook it calls, directly or
// through its children.
type Loaded struct {
	Runbook  *Runbook
	Children map[string]*Runbook
}

// LoadFile loads and validates the runbook in path. Child runbooks are
// looked up next to it first, then in the library. cluster may be nil.
func (l *Library) LoadFile(path string, cluster *inventory.Cluster) (*Loaded, error) {
	docs, err := source.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lib := &Library{Dirs: append([]string{filepath.Dir(path)}, l.Dirs...), Builtin: l.Builtin}
	return lib.load(docs, cluster)
}

// ErrNoRunbook is wrapped by Load's error when no runbook has the name.
var ErrNoRunbook = errors.New("no runbook")

// Load loads a runbook by name.
func (l *Library) Load(name string, cluster *inventory.Cluster) (*Loaded, error) {
	docs, err := l.find(name)
	if err != nil {
		return nil, err
	}
	if docs == nil {
		return nil, fmt.Errorf("%w named %q (looked in %s)", ErrNoRunbook, name, l.where())
	}
	return l.load(docs, cluster)
}

func (l *Library) load(docs []source.Document, cluster *inventory.Cluster) (*Loaded, error) {
	if len(docs) != 1 {
		return nil, source.Errors{{Pos: source.At(docs[1].File, docs[1].Root), Msg: "a runbook file holds one document"}}
	}
	out := &Loaded{Children: map[string]*Runbook{}}
	var errs source.Errors
	loading := map[string]bool{}
	var loadOne func(doc source.Document) *Runbook
	loadOne = func(doc source.Document) *Runbook {
		rb, derrs := decode(doc)
		errs = append(errs, derrs...)
		if doc.Root.Kind != yaml.MappingNode {
			return nil
		}
		loading[rb.Name] = true
		defer delete(loading, rb.Name)
		lookup := func(name string) (*Runbook, error) {
			if c, ok := out.Children[name]; ok {
				return c, nil
			}
			if loading[name] {
				return nil, fmt.Errorf("runbook %s calls itself through %s", name, rb.Name)
			}
			cdocs, err := l.find(name)
			if err != nil || cdocs == nil {
				return nil, err
			}
			c := loadOne(cdocs[0])
			if c == nil {
				return nil, fmt.Errorf("runbook %s has errors (reported above)", name)
			}
			out.Children[name] = c
			return c, nil
		}
		errs = append(errs, validate(rb, lookup, cluster)...)
		if len(derrs) > 0 {
			return nil
		}
		return rb
	}
	out.Runbook = loadOne(docs[0])
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func (l *Library) find(name string) ([]source.Document, error) {
	if strings.ContainsAny(name, `/\`) || name == "" || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("runbook name %q must be a plain name", name)
	}
	for _, dir := range l.Dirs {
		for _, ext := range []string{".yaml", ".yml"} {
			p := filepath.Join(dir, name+ext)
			if _, err := os.Stat(p); err == nil {
				docs, err := source.ReadFile(p)
				if err != nil {
					return nil, err
				}
				return docs, namedAs(docs, name)
			}
		}
	}
	if l.Builtin != nil {
		data, err := fs.ReadFile(l.Builtin, name+".yaml")
		if err == nil {
			docs, err := source.Parse("builtin:"+name+".yaml", data)
			if err != nil {
				return nil, err
			}
			return docs, namedAs(docs, name)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read builtin runbook %s: %w", name, err)
		}
	}
	return nil, nil
}

// namedAs refuses a runbook found by name whose metadata.name is another:
// a runbook is known by its name in locks, authorization and the Web UI,
// so a copy under another file name must not pass for the original.
func namedAs(docs []source.Document, name string) error {
	if len(docs) == 0 || docs[0].Root.Kind != yaml.MappingNode {
		return nil
	}
	for _, f := range source.Pairs(docs[0].File, docs[0].Root, "runbook", &source.Errors{}) {
		if f.Key.Value != "metadata" || f.Value.Kind != yaml.MappingNode {
			continue
		}
		for _, m := range source.Pairs(docs[0].File, f.Value, "metadata", &source.Errors{}) {
			if m.Key.Value == "name" && m.Value.Kind == yaml.ScalarNode && m.Value.Value != name {
				return source.Errors{{Pos: source.At(docs[0].File, m.Value), Msg: fmt.Sprintf("metadata.name %q is not the file's name %q: a runbook is found, locked and authorized by its name, so the two must agree", m.Value.Value, name)}}
			}
		}
	}
	return nil
}

func (l *Library) where() string {
	places := append([]string{}, l.Dirs...)
	if l.Builtin != nil {
		places = append(places, "the built-in runbooks")
	}
	if len(places) == 0 {
		return "nowhere"
	}
	return strings.Join(places, ", ")
}

// ChildValues are the runbooks a loaded runbook's steps call, by name, as
// a run carries them.
func (l *Loaded) ChildValues() map[string]Runbook {
	out := make(map[string]Runbook, len(l.Children))
	for name, child := range l.Children {
		out[name] = *child
	}
	return out
}
