package starter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/fleetlock"
)

// fleetlock-url prints each node's base URL with the token the webhook
// server derives from the cluster's key: the one it accepts for that node
// and no other.
func TestFleetLockURL(t *testing.T) {
	dir := t.TempDir()
	key := "fleetlock-key-0123456789abcdef"
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("k", key+"\n", 0o600)
	write("inv.yaml", `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {user: core, become: sudo, identityFile: id, knownHostsFile: kh}
controllers:
  - {name: controller-1, address: 10.0.0.1}
workers:
  - {name: worker-1, address: 10.0.0.2, fleetLockId: de35106b6ec24688b63afddaa156679b}
`, 0o644)
	write("c.yaml", "apiVersion: kedge/v1\nkind: ChatOps\nclusters:\n  mercury:\n    inventory: inv.yaml\n    fleetLock: {keyFile: k}\nallow: []\n", 0o644)
	cfg := filepath.Join(dir, "c.yaml")
	out, errOut, code := runCLI(t, "fleetlock-url", "--config", cfg, "--public-url", "https://kedge.example:8235/", "--output", "json", "mercury", "worker-1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var nodes []fleetLockNode
	if err := json.Unmarshal([]byte(out), &nodes); err != nil || len(nodes) != 1 {
		t.Fatalf("%q: %v", out, err)
	}
	want := "https://kedge.example:8235/fleetlock/mercury/worker-1/" + fleetlock.Token([]byte(key), "mercury", "worker-1") + "/"
	if nodes[0].BaseURL != want || nodes[0].ClientID != "de35106b6ec24688b63afddaa156679b" {
		t.Errorf("got %+v, want base URL %s", nodes[0], want)
	}
	if _, errOut, code := runCLI(t, "fleetlock-url", "--config", cfg, "--public-url", "https://kedge.example", "mercury", "ghost"); code == 0 || !strings.Contains(errOut, `no node "ghost"`) {
		t.Errorf("a node not in the inventory: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "fleetlock-url", "--config", cfg, "--public-url", "ftp://x", "mercury"); code != ExitUsage || !strings.Contains(errOut, "not an http(s) URL") {
		t.Errorf("a bad public URL: exit %d: %s", code, errOut)
	}
}
