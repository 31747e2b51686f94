package starter

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/internal/mtls"
)

// `kedge setup tls` makes each kind of certificate: the default clients
// with their roles (a viewer among them), a named client with the role it
// is given, a worker with the task queues it may poll; a client named
// without a role it cannot be given one by default is refused, naming the
// roles.
func TestSetupTLSMakesEachRole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	out, errOut, code := runCLI(t, "setup", "tls", "--out", dir, "--output", "json")
	var res mtls.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	roles := map[string]mtls.Role{}
	for _, f := range res.Files {
		if f.Role != "" {
			roles[strings.TrimSuffix(filepath.Base(f.Path), ".pem")] = f.Role
		}
	}
	want := map[string]mtls.Role{"server": mtls.RoleSystem, "kedge-worker": mtls.RoleWorker, "kedge-webhook": mtls.RoleOperator,
		"kedge-setup": mtls.RoleAdmin, "temporal-ui": mtls.RoleViewer, "temporal-admin": mtls.RoleAdmin, "operator": mtls.RoleOperator, "viewer": mtls.RoleViewer}
	for name, r := range want {
		if roles[name] != r {
			t.Errorf("%s.pem: role %q, want %q", name, roles[name], r)
		}
	}
	out, errOut, code = runCLI(t, "setup", "tls", "--out", dir, "--client", "alice:operator", "--client", "lyon-1:worker", "--task-queue", "lyon")
	if code != 0 || !strings.Contains(out, "alice.pem (operator)") || !strings.Contains(out, "lyon-1.pem (worker of lyon)") {
		t.Errorf("named clients: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "setup", "tls", "--out", dir, "--client", "bob"); code != ExitFailed || !strings.Contains(errOut, "bob:ROLE") {
		t.Errorf("a client without a role: exit %d: %s", code, errOut)
	}
}
