package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

// The worker owns its credentials: a codec key holder who starts runs
// from an inventory naming another Vault address, Vault token file, SSH
// key or host address than the worker's gets the worker's own, because a
// run carries only which cluster and which host. The listeners standing
// in for the other Vault and the other host see no connection, the
// worker's Vault sees only the worker's token, and the host touched is
// the worker's worker-1 reached with the worker's key. A cluster the
// worker does not serve is refused at the first action, without retry,
// with an audit line in the worker's log.
func TestAKeyHolderGetsOnlyTheWorkersCredentials(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	secret := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	workerToken := secret("vault-token", "s.the-workers-token\n")
	otherSecret := secret("other-secret", "s.another-secret-of-the-worker\n")
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	otherKey := secret("id_other", string(pem.EncodeToMemory(block)))

	var vaultHits, strangerHits, hostDials atomic.Int32
	var tokensMu sync.Mutex
	tokens := map[string]bool{}
	vaultSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vaultHits.Add(1)
		tokensMu.Lock()
		tokens[r.Header.Get("X-Vault-Token")] = true
		tokensMu.Unlock()
		http.Error(w, `{"errors":["permission denied"]}`, http.StatusForbidden)
	}))
	defer vaultSrv.Close()
	stranger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		strangerHits.Add(1)
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer stranger.Close()
	fakeHost, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fakeHost.Close()
	go func() {
		for {
			c, err := fakeHost.Accept()
			if err != nil {
				return
			}
			hostDials.Add(1)
			c.Close()
		}
	}()

	labText := lab.Inventory("lab", world.lab, world.lab.KnownHostsFile)
	files := 0
	inventoryFile := func(text string) string {
		files++
		p := filepath.Join(dir, fmt.Sprintf("inventory-%d.yaml", files))
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withVault := func(addr, token string) string {
		return inventoryFile(strings.Replace(lab.Inventory("vaulted", world.lab, world.lab.KnownHostsFile), "controllers:\n",
			fmt.Sprintf("vault:\n  address: %s\n  tokenFile: %s\ncontrollers:\n", addr, token), 1))
	}
	// What the worker serves: the world's lab, and a cluster with a Vault.
	workerServes(world.inventory)
	vaulted := withVault(vaultSrv.URL, workerToken)
	workerServes(vaulted)

	readSecret := writeRunbook(t, `apiVersion: kedge/v1
kind: Runbook
metadata: {name: read-a-secret}
steps:
  - id: read
    action: vault.read-secret
    with: {path: kubernetes/x}
    retry: {maxAttempts: 1}
`)
	touch := writeRunbook(t, `apiVersion: kedge/v1
kind: Runbook
metadata: {name: touch-a-host}
steps:
  - id: touch
    action: host.run
    on: worker-1
    with: {command: "touch /tmp/kedge-key-holder"}
`)
	fakeAddr := fakeHost.Addr().(*net.TCPAddr)
	touched := func() bool {
		_, err := labHost(t, "worker-1").Exec(t.Context(), "test", "-e", "/tmp/kedge-key-holder")
		return err == nil
	}
	for _, c := range []struct {
		name, runbook, inventory string
		touches                  bool // the run touches the worker's worker-1
	}{
		{"another Vault address", readSecret, withVault(stranger.URL, workerToken), false},
		{"another token file", readSecret, withVault(vaultSrv.URL, otherSecret), false},
		{"another SSH key", touch, inventoryFile(strings.Replace(labText,
			"identityFile: "+world.lab.IdentityFile, "identityFile: "+otherKey, 1)), true},
		{"another host address", touch, inventoryFile(strings.Replace(labText,
			fmt.Sprintf("address: %s\n    port: %d\n", labHost(t, "worker-1").Address, labHost(t, "worker-1").Port),
			fmt.Sprintf("address: %s\n    port: %d\n", fakeAddr.IP, fakeAddr.Port), 1)), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			hits := vaultHits.Load()
			p, id := runAsKeyHolder(t, c.runbook, c.inventory)
			if strings.Contains(world.workerLog.String(), id) && strings.Contains(world.workerLog.String(), "action refused") {
				t.Errorf("the run was refused; it should have got the worker's own credentials")
			}
			if c.touches {
				if p.State != workflows.StateSucceeded || !touched() {
					t.Fatalf("the worker's own host was not reached with the worker's own key: %+v", p)
				}
				_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-f", "/tmp/kedge-key-holder")
				return
			}
			// The worker's Vault answers 403: the run fails there, after
			// asking the worker's Vault with the worker's token.
			if vaultHits.Load() == hits || p.State != workflows.StateFailed || !strings.Contains(p.Steps[0].LastError, "permission denied") {
				t.Errorf("the worker's own Vault was not asked: %d requests, %+v", vaultHits.Load()-hits, p)
			}
		})
	}
	tokensMu.Lock()
	if len(tokens) != 1 || !tokens["s.the-workers-token"] {
		t.Errorf("tokens the worker's Vault saw: %v; want only the worker's", tokens)
	}
	tokensMu.Unlock()
	if n := strangerHits.Load() + hostDials.Load(); n != 0 {
		t.Fatalf("runs reached what the key holder named: the other Vault %d, the other host %d", strangerHits.Load(), hostDials.Load())
	}

	// A cluster the worker does not serve: refused before anything runs.
	p, id := runAsKeyHolder(t, touch, inventoryFile(strings.Replace(labText, "name: lab\n", "name: elsewhere\n", 1)))
	if p.State != workflows.StateFailed || len(p.Steps) != 1 {
		t.Fatalf("the run was not refused: %+v", p)
	}
	if s := p.Steps[0]; s.Attempts != 1 || !strings.Contains(s.LastError, `does not serve cluster "elsewhere"`) {
		t.Errorf("step %s: %d attempts, %q; want one attempt refused", s.ID, s.Attempts, s.LastError)
	}
	if log := world.workerLog.String(); !strings.Contains(log, "action refused") || !strings.Contains(log, id) {
		t.Errorf("no audit line for %s in the worker's log:\n%s", id, log)
	}
	if touched() {
		t.Fatal("worker-1 was touched by a run on a cluster the worker does not serve")
	}
}

// runAsKeyHolder runs `kedge run --wait` as someone holding the codec key
// on their own machine: the inventory is theirs, the world's worker is not
// told about it.
func runAsKeyHolder(t *testing.T, runbook, inv string) (workflows.Progress, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := starter.Main([]string{"kedge", "run", runbook, "--inventory", inv, "--address", world.srv.FrontendAddress(),
		"--wait", "--output", "json"}, starter.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	var p workflows.Progress
	if err := json.Unmarshal([]byte(out.String()), &p); err != nil {
		t.Fatalf("kedge run: exit %d, no progress JSON (%v)\nstdout: %s\nstderr: %s", code, err, out.String(), errOut.String())
	}
	return p, p.WorkflowID
}
