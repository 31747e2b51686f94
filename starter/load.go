package starter

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runs"
)

var (
	inventoryFlag = &cli.StringFlag{Name: "inventory", Aliases: []string{"i"}, Usage: "cluster inventory `FILE` (kind: Cluster)", EnvVars: []string{"KEDGE_INVENTORY"}}
	setFlag       = &cli.StringSliceFlag{Name: "set", Usage: "runbook param `NAME=VALUE` (repeatable)"}
	setFileFlag   = &cli.StringSliceFlag{Name: "set-file", Usage: "runbook param `NAME=FILE`: the file's content (at most 1 MiB; repeatable), e.g. a key kept with the cluster's assets"}
	pathFlag      = &cli.StringFlag{Name: "runbook-path", Usage: "colon-separated `DIRS` where child runbooks are looked up", EnvVars: []string{"KEDGE_RUNBOOK_PATH"}}
)

func library(c *cli.Context) *runbooks.Library {
	lib := &runbooks.Library{Builtin: runbooks.Builtin}
	if p := c.String("runbook-path"); p != "" {
		lib.Dirs = filepath.SplitList(p)
	}
	return lib
}

// parseSets turns --set k=v flags into a map. The flag library splits a
// flag's value at its commas, so an item with no "=" is the rest of the
// one before it: --set cas=cluster,etcd is one list param (a list value
// whose items hold "=" needs --set-file).
func parseSets(sets []string) (map[string]any, error) {
	var joined []string
	for _, s := range sets {
		if len(joined) > 0 && !strings.Contains(s, "=") {
			joined[len(joined)-1] += "," + s
			continue
		}
		joined = append(joined, s)
	}
	out := map[string]any{}
	for _, s := range joined {
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want NAME=VALUE", s)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("--set %s given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// maxSetFile caps a --set-file.
const maxSetFile = 1 << 20

// readSetFiles adds each --set-file NAME=FILE to sets as the file's
// content.
func readSetFiles(sets map[string]any, files []string) error {
	for _, s := range files {
		k, file, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || file == "" {
			return fmt.Errorf("--set-file %q: want NAME=FILE", s)
		}
		if _, dup := sets[k]; dup {
			return fmt.Errorf("--set-file %s: %s is already set", k, k)
		}
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("--set-file %s: %w", k, err)
		}
		data, err := io.ReadAll(io.LimitReader(f, maxSetFile+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("--set-file %s: %w", k, err)
		}
		if len(data) > maxSetFile {
			return fmt.Errorf("--set-file %s: %s is larger than 1 MiB", k, file)
		}
		sets[k] = string(data)
	}
	return nil
}

// compile parses the flags of a start (run, plan, schedule) and prepares
// it the way every front door does (runs.Prepare), or explains what is
// wrong. It never contacts Temporal or a host.
func compile(c *cli.Context) (*runs.Prepared, error) {
	if c.NArg() != 1 {
		return nil, usageError("%s takes one RUNBOOK file, got %d arguments", c.Command.Name, c.NArg())
	}
	invPath := c.String("inventory")
	if invPath == "" {
		return nil, usageError("%s needs --inventory FILE", c.Command.Name)
	}
	sets, err := parseSets(c.StringSlice("set"))
	if err != nil {
		return nil, usageError("%v", err)
	}
	if err := readSetFiles(sets, c.StringSlice("set-file")); err != nil {
		return nil, usageError("%v", err)
	}
	// The CLI's operator holds the files and the keys: a runbook by its
	// file, and an internal one, are theirs to start.
	p, err := runs.Prepare(invPath, c.Args().First(), sets, runs.Policy{Library: library(c), Files: true, Internal: true})
	var refused *runs.PrepareError
	if !errors.As(err, &refused) {
		return p, err
	}
	switch refused.Refusal {
	case runs.BadInventory:
		return nil, failed("invalid inventory:\n%v", refused.Err)
	case runs.NoRunbook, runs.BadRunbook:
		return nil, failed("invalid runbook:\n%v", refused.Err)
	case runs.BadParams:
		return nil, failed("bad params for %s:\n%v", refused.Runbook, refused.Err)
	}
	return nil, failed("%v", refused)
}
