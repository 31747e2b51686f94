package toolsdir

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"kedge.dev/kedge/integration/srcroot"
)

// Dir resolves one tools directory, once per process.
type Dir struct {
	Env    string // e.g. KEDGE_KUBE_TOOLS
	Script string // e.g. kube-tools.sh, under scripts/
	Args   []string
	What   string // for errors, e.g. "the control plane"

	once sync.Once
	dir  string
	err  error
}

// Get returns the directory, running the script the first time when the
// environment names none.
func (d *Dir) Get() (string, error) {
	d.once.Do(func() {
		if v := os.Getenv(d.Env); v != "" {
			d.dir = v
			return
		}
		root, err := srcroot.Dir()
		if err != nil {
			d.err = fmt.Errorf("build %s (scripts/%s): %w", d.What, d.Script, err)
			return
		}
		cmd := exec.Command("bash", append([]string{filepath.Join(root, "scripts", d.Script)}, d.Args...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			d.err = fmt.Errorf("build %s (scripts/%s): %w", d.What, d.Script, err)
			return
		}
		d.dir = strings.TrimSpace(string(out))
	})
	return d.dir, d.err
}
