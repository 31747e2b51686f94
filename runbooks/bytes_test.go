package runbooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/runbooks/inventory"
)

// flood is head, an anchor on one 820 KB scalar, mid, then 45,000 aliases
// to it in a flow list: 1 MB on disk, 37 GB expanded.
func flood(head, mid string) string {
	return head + "&a \"k=" + strings.Repeat("x", 820_000) + "\"" + mid + strings.Repeat("*a, ", 44_999) + "*a]"
}

// The attacker's runbook and an inventory built the same way are refused
// when loaded, with the file and line, before validation or a plan copies
// anything out of them (the runbook loaded and validated; `kedge plan` ran
// out of memory at 3.3 GB).
func TestAliasFloodsAreRefusedWhenLoaded(t *testing.T) {
	dir := t.TempDir()
	t.Run("runbook", func(t *testing.T) {
		p := filepath.Join(dir, "flood.yaml")
		body := flood("apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: flood}\nparams:\n  big: {type: string, default: ",
			"}\nsteps:\n  - id: one\n    action: host.run\n    on: worker-1\n    with:\n      command: \"true\"\n      env: {A: [") + "}\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := (&Library{}).LoadFile(p, testCluster(t))
		if err == nil || !strings.HasPrefix(err.Error(), p+":12:") || !strings.Contains(err.Error(), "aliases expand the document to more than 4194304 bytes of text") {
			t.Errorf("runbook: %v", err)
		}
	})
	t.Run("inventory", func(t *testing.T) {
		p := filepath.Join(dir, "inventory.yaml")
		body := flood("apiVersion: kedge/v1\nkind: Cluster\nmetadata: {name: flood}\nssh: {identityFile: id, knownHostsFile: known_hosts}\nworkers:\n  - {name: w, address: 127.0.0.1, labels: [",
			", ") + "}\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := inventory.LoadFile(p)
		if err == nil || !strings.HasPrefix(err.Error(), p+":6:") || !strings.Contains(err.Error(), "bytes of text") {
			t.Errorf("inventory: %v", err)
		}
	})
}
