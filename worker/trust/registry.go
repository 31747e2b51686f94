package trust

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"kedge.dev/kedge/runbooks/inventory"
)

// Registry holds the inventories of the clusters a worker serves.
type Registry interface {
	// Cluster is the worker's own inventory of the named cluster.
	Cluster(name string) (*inventory.Cluster, error)
	// Clusters lists every cluster served.
	Clusters() ([]*inventory.Cluster, error)
}

// Files is a Registry read from inventory files and directories of them
// (their *.yaml and *.yml files). Files are read again when they change,
// so an edited inventory (a node added before a join) counts at once.
type Files struct {
	paths []string

	mu    sync.Mutex
	cache map[string]loaded // by file
}

type loaded struct {
	mod     time.Time
	size    int64
	cluster *inventory.Cluster
	err     error
}

// Load builds a Files registry and reads it once: a path that does not
// exist, an inventory that does not load or two files naming one cluster
// is an error. An empty directory is not: inventories put there later
// count.
func Load(paths []string) (*Files, error) {
	if len(paths) == 0 {
		return nil, errors.New("no inventories given: a worker serves the clusters whose inventories it is given (--clusters FILE|DIR)")
	}
	f := &Files{cache: map[string]loaded{}}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		f.paths = append(f.paths, abs)
	}
	found, errs := f.scan()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	byName := map[string]string{}
	for _, e := range found {
		if other, ok := byName[e.cluster.Name]; ok {
			return nil, fmt.Errorf("cluster %s is in two inventories: %s and %s", e.cluster.Name, other, e.file)
		}
		byName[e.cluster.Name] = e.file
	}
	return f, nil
}

type entry struct {
	file    string
	cluster *inventory.Cluster
}

// scan reads every inventory again if it changed since it was last read.
func (f *Files) scan() ([]entry, []error) {
	var files []string
	var errs []error
	for _, p := range f.paths {
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		des, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, de := range des {
			name := de.Name()
			if de.IsDir() || strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
				continue
			}
			files = append(files, filepath.Join(p, name))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []entry
	for _, file := range files {
		st, err := os.Stat(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l, ok := f.cache[file]
		if !ok || !l.mod.Equal(st.ModTime()) || l.size != st.Size() {
			l = loaded{mod: st.ModTime(), size: st.Size()}
			l.cluster, l.err = inventory.LoadFile(file)
			f.cache[file] = l
		}
		if l.err != nil {
			errs = append(errs, l.err)
			continue
		}
		out = append(out, entry{file: file, cluster: l.cluster})
	}
	return out, errs
}

// Cluster finds the cluster's inventory among the worker's files.
func (f *Files) Cluster(name string) (*inventory.Cluster, error) {
	found, errs := f.scan()
	var match []entry
	for _, e := range found {
		if e.cluster.Name == name {
			match = append(match, e)
		}
	}
	switch len(match) {
	case 1:
		return match[0].cluster, nil
	case 0:
		var names []string
		for _, e := range found {
			names = append(names, e.cluster.Name)
		}
		err := notServed(name, names)
		if len(errs) > 0 {
			err = fmt.Errorf("%w; unreadable: %w", err, errors.Join(errs...))
		}
		return nil, err
	default:
		return nil, fmt.Errorf("cluster %s is in two of this worker's inventories: %s and %s", name, match[0].file, match[1].file)
	}
}

// Clusters lists the clusters of every inventory that loads.
func (f *Files) Clusters() ([]*inventory.Cluster, error) {
	found, errs := f.scan()
	var out []*inventory.Cluster
	for _, e := range found {
		out = append(out, e.cluster)
	}
	return out, errors.Join(errs...)
}

func notServed(name string, served []string) error {
	slices.Sort(served)
	list := "none"
	if len(served) > 0 {
		list = strings.Join(served, ", ")
	}
	return fmt.Errorf("this worker does not serve cluster %q (it serves: %s); give the worker its inventory (--clusters FILE|DIR of kedge worker or kedge dev)", name, list)
}

// Set is a Registry held in memory: tests, and programs that build
// inventories themselves.
type Set struct {
	mu sync.RWMutex
	m  map[string]*inventory.Cluster
}

// Put adds a cluster, replacing one of the same name.
func (s *Set) Put(c *inventory.Cluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*inventory.Cluster{}
	}
	s.m[c.Name] = c
}

// Cluster finds a cluster by name.
func (s *Set) Cluster(name string) (*inventory.Cluster, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c, ok := s.m[name]; ok {
		return c, nil
	}
	var names []string
	for n := range s.m {
		names = append(names, n)
	}
	return nil, notServed(name, names)
}

// Clusters lists the clusters held.
func (s *Set) Clusters() ([]*inventory.Cluster, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*inventory.Cluster
	for _, c := range s.m {
		out = append(out, c)
	}
	return out, nil
}
