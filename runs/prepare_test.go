package runs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testInventory = "../runbooks/testdata/inventory.yaml"

// Every refusal of Prepare is typed, so each front door maps it alone
// (an exit code, an HTTP status), and nothing that is refused is
// prepared.
func TestPrepareRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badInventory := write("inventory.yaml", "apiVersion: kedge/v1\nkind: Cluster\nmetadata: {name: x}\ncontrollers: [{name: c}]\nbogus: 1\n")
	runbook := func(on string) string {
		return "apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: probe}\nparams:\n  n: {type: string, default: controller-1}\n" +
			"steps:\n  - id: probe\n    action: host.run\n    on: " + on + "\n    with: {command: uname -r}\n"
	}
	good := write("probe.yaml", runbook("${ params.n }"))
	cli := Policy{Files: true, Internal: true}
	for _, tc := range []struct {
		name      string
		inventory string
		runbook   string
		params    map[string]any
		policy    Policy
		want      Refusal // 0: prepared
		says      string
	}{
		{name: "a runbook file, from the CLI", runbook: good, policy: cli},
		{name: "a built-in by name", runbook: "run-command", params: map[string]any{"command": "uname -r"}, policy: Policy{}},
		{name: "an inventory that does not load", inventory: badInventory, runbook: good, policy: cli, want: BadInventory, says: "bogus"},
		{name: "an inventory of another cluster", runbook: "run-command", policy: Policy{Cluster: "venus"}, want: WrongCluster, says: `names the cluster "mercury"`},
		{name: "no such runbook", runbook: "no-such-runbook", want: NoRunbook, says: `no runbook named "no-such-runbook"`},
		{name: "a file named where only names are taken", runbook: good, want: BadRunbook, says: "must be a plain name"},
		{name: "a runbook that does not load", runbook: write("broken.yaml", runbook("${ nodes.named() }")), policy: cli, want: BadRunbook, says: "broken.yaml:9:12: bad expression"},
		{name: "an internal runbook from chat", runbook: "cert-renewal-kubelet", want: InternalRunbook, says: "called by other runbooks only"},
		{name: "an internal runbook from the CLI", runbook: "cert-renewal-kubelet", policy: cli, want: BadParams},
		{name: "a param it does not take", runbook: good, params: map[string]any{"m": "x"}, policy: cli, want: BadParams, says: "m"},
		{name: "a node the cluster lacks", runbook: good, params: map[string]any{"n": "worker-9"}, policy: cli, want: CannotRun, says: `no node "worker-9" in cluster mercury`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := tc.inventory
			if inv == "" {
				inv = testInventory
			}
			p, err := Prepare(inv, tc.runbook, tc.params, tc.policy)
			var refused *PrepareError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == 0:
				if in := p.Input(); in.Cluster.Name != "mercury" || in.Runbook.Name == "" {
					t.Errorf("prepared input %s on %q", in.Runbook.Name, in.Cluster.Name)
				}
			case !errors.As(err, &refused):
				t.Fatalf("got %v (%T), want refusal %d", err, err, tc.want)
			case refused.Refusal != tc.want:
				t.Errorf("refusal %d, want %d: %v", refused.Refusal, tc.want, err)
			case p != nil:
				t.Errorf("refused, yet prepared: %+v", p)
			case !strings.Contains(err.Error(), tc.says):
				t.Errorf("%q does not say %q", err, tc.says)
			}
		})
	}
}
