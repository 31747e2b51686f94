package runbooks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A runbook author's runbook whose expressions each pass the per-render
// limit but add up, in one run, to more than a run may spend: a hundred
// and fifty costly conditions, or a rollout whose with holds one costly
// expression for each item. Validation refuses both (it took 0.2 s to pass
// them, and the worker then rendered for minutes in one workflow task).
func TestExpressionsThatAddUpPastARunAreRefused(t *testing.T) {
	cluster := testCluster(t)
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var whens strings.Builder
	for i := range 150 {
		fmt.Fprintf(&whens, "  - {id: s%d, when: \"lists.range(900000).size() == 0\", action: host.run, on: worker-1, with: {command: \"true\"}}\n", i)
	}
	head := "apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: %s}\nsteps:\n"
	write("one", "apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: one}\nparams:\n  n: {type: string}\nsteps:\n  - {id: s, action: host.run, on: worker-1, with: {command: \"true\"}}\n")
	for name, c := range map[string]struct{ doc, want string }{
		"many-whens": {fmt.Sprintf(head, "many-whens") + whens.String(), "many-whens.yaml:1:1: runbook many-whens: its expressions may cost up to 135000450 operations in one run"},
		"rollout-with": {fmt.Sprintf(head, "rollout-with") +
			"  - {id: r, runbook: one, rollout: {over: \"${ cluster.workers.map(w, w.name) }\"}, with: {n: \"${ string(lists.range(900000).size()) }\"}}\n",
			"rollout-with.yaml:1:1: runbook rollout-with: its expressions may cost up to"},
	} {
		_, err := (&Library{Dirs: []string{dir}}).LoadFile(write(name, c.doc), cluster)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "more than a run may spend (50000000)") {
			t.Errorf("%s: %v\nwant %s", name, err, c.want)
		}
	}
	// A few costly conditions still pass: each render holds to its own
	// limit, the run to its total.
	var few strings.Builder
	for i := range 10 {
		fmt.Fprintf(&few, "  - {id: s%d, when: \"lists.range(900000).size() == 0\", action: host.run, on: worker-1, with: {command: \"true\"}}\n", i)
	}
	if _, err := (&Library{Dirs: []string{dir}}).LoadFile(write("few", fmt.Sprintf(head, "few")+few.String()), cluster); err != nil {
		t.Errorf("ten costly conditions: %v", err)
	}
}
