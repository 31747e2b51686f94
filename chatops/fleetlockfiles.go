package chatops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
)

// fleetLockFiles keeps, by cluster, what every FleetLock request reads
// from files: the cluster's inventory and the two runbooks its
// coordinator runs. They are parsed again only when one of the files they
// come from changed, by modification time or size (as the worker reloads
// its inventories), or appeared or went: a burst of requests parses
// nothing, a changed file is read on the next request.
type fleetLockFiles struct {
	mu        sync.Mutex
	byCluster map[string]*fleetLockLoad
	parses    int // loads done, for tests
}

// fleetLockLoad is what a cluster's files said when last parsed.
type fleetLockLoad struct {
	stamp   []fileStamp
	cluster *inventory.Cluster
	invErr  error // the inventory did not load
	drain   runbooks.Runbook
	release runbooks.Runbook
	rbErr   error // a runbook did not load
}

// fileStamp is a file as looked at: whether it is there, and its
// modification time and size.
type fileStamp struct {
	path   string
	exists bool
	mod    int64 // UnixNano
	size   int64
}

func stampOf(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{path: path}
	}
	return fileStamp{path: path, exists: true, mod: st.ModTime().UnixNano(), size: st.Size()}
}

// stamps looks at the files a cluster's load reads: its inventory, and
// every place the runbook path has for the coordinator's runbooks (the
// built-in ones do not change while the server runs).
func stamps(inv string, runbookPath []string) []fileStamp {
	out := []fileStamp{stampOf(inv)}
	for _, name := range []string{fleetLockDrainRunbook, fleetLockReleaseRunbook} {
		for _, dir := range runbookPath {
			for _, ext := range []string{".yaml", ".yml"} {
				out = append(out, stampOf(filepath.Join(dir, name+ext)))
			}
		}
	}
	return out
}

// load is the cluster's files as parsed, parsing them again if they
// changed since.
func (f *fleetLockFiles) load(name, inv string, runbookPath []string) *fleetLockLoad {
	stamp := stamps(inv, runbookPath)
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.byCluster[name]; ok && slices.Equal(l.stamp, stamp) {
		return l
	}
	l := &fleetLockLoad{stamp: stamp}
	l.cluster, l.invErr = loadFleetLockCluster(name, inv)
	if l.invErr == nil {
		l.drain, l.release, l.rbErr = loadFleetLockRunbooks(l.cluster, runbookPath)
	}
	f.parses++
	if f.byCluster == nil {
		f.byCluster = map[string]*fleetLockLoad{}
	}
	f.byCluster[name] = l
	return l
}

func loadFleetLockCluster(name, inv string) (*inventory.Cluster, error) {
	c, err := inventory.LoadFile(inv)
	if err != nil {
		return nil, err
	}
	if c.Name != name {
		return nil, fmt.Errorf("the inventory of %s names the cluster %q", name, c.Name)
	}
	return c, nil
}

func loadFleetLockRunbooks(c *inventory.Cluster, runbookPath []string) (drain, release runbooks.Runbook, err error) {
	lib := &runbooks.Library{Dirs: runbookPath, Builtin: runbooks.Builtin}
	var rbs [2]runbooks.Runbook
	for i, name := range []string{fleetLockDrainRunbook, fleetLockReleaseRunbook} {
		l, err := lib.Load(name, c)
		if err != nil {
			return drain, release, fmt.Errorf("fleetlock: runbook %s: %w", name, err)
		}
		if l.Runbook == nil {
			return drain, release, errors.New("fleetlock: runbook " + name + " did not load")
		}
		rbs[i] = *l.Runbook
	}
	return rbs[0], rbs[1], nil
}
