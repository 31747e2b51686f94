package trust

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"kedge.dev/kedge/activities/kube"
	"kedge.dev/kedge/activities/render"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/runbooks/inventory"
)

const mercury = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {user: core, become: sudo, identityFile: id_ed25519, knownHostsFile: known_hosts}
kubernetes: {kubeconfig: admin.conf}
vault: {address: "https://vault.mercury:8200", tokenFile: vault-token}
controllers:
  - {name: cp-1, address: 10.0.0.1}
workers:
  - {name: w-1, address: 10.0.0.2, port: 2222}
`

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// registry is a Files registry over a directory holding mercury.
func registry(t *testing.T) (*Files, string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "mercury.yaml", mercury)
	f, err := Load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return f, dir
}

func TestFilesReadsInventoriesAndTheirChanges(t *testing.T) {
	f, dir := registry(t)
	c, err := f.Cluster("mercury")
	if err != nil {
		t.Fatal(err)
	}
	if c.SSH.IdentityFile != filepath.Join(dir, "id_ed25519") {
		t.Errorf("paths are not resolved against the inventory's directory: %s", c.SSH.IdentityFile)
	}
	if _, err := f.Cluster("venus"); err == nil || !strings.Contains(err.Error(), `does not serve cluster "venus" (it serves: mercury)`) {
		t.Errorf("an unknown cluster: %v", err)
	}
	// A node added to the file counts at once, without a restart.
	p := filepath.Join(dir, "mercury.yaml")
	writeFile(t, dir, "mercury.yaml", mercury+"  - {name: w-2, address: 10.0.0.3}\n")
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	c, err = f.Cluster("mercury")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Node("w-2"); !ok {
		t.Error("the edited inventory was not read again")
	}
	// Files other than *.yaml and *.yml, and hidden ones, are not inventories.
	writeFile(t, dir, "notes.txt", "not an inventory")
	writeFile(t, dir, ".draft.yaml", "not: [an inventory")
	if cs, err := f.Clusters(); err != nil || len(cs) != 1 {
		t.Errorf("clusters: %d, %v", len(cs), err)
	}
}

func TestFilesRefusesWhatIsAmbiguousOrBroken(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", mercury)
	writeFile(t, dir, "b.yml", mercury)
	if _, err := Load([]string{dir}); err == nil || !strings.Contains(err.Error(), "cluster mercury is in two inventories") {
		t.Errorf("two files naming one cluster: %v", err)
	}
	bad := t.TempDir()
	writeFile(t, bad, "broken.yaml", strings.Replace(mercury, "address: 10.0.0.1", "adress: 10.0.0.1", 1))
	if _, err := Load([]string{bad}); err == nil || !strings.Contains(err.Error(), "broken.yaml:8:") {
		t.Errorf("a broken inventory: %v", err)
	}
	if _, err := Load([]string{filepath.Join(dir, "missing.yaml")}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing path: %v", err)
	}
	if _, err := Load(nil); err == nil {
		t.Error("no paths: no error")
	}
	empty, err := Load([]string{t.TempDir()})
	if err != nil {
		t.Fatalf("an empty directory: %v", err)
	}
	if _, err := empty.Cluster("mercury"); err == nil || !strings.Contains(err.Error(), "it serves: none") {
		t.Errorf("nothing served: %v", err)
	}
}

// An action's input as the workflow renders it from the inventory.
type hostInput struct {
	Target  sshpool.Target `json:"target"`
	Command string         `json:"command"`
}

type vaultInput struct {
	Vault inventory.Vault `json:"vault"`
}

type kubeInput struct {
	Cluster kube.Cluster `json:"cluster"`
	Node    string       `json:"node"`
}

func TestGuardAllowsOnlyTheWorkersOwn(t *testing.T) {
	f, _ := registry(t)
	g := &Guard{Registry: f}
	c, _ := f.Cluster("mercury")
	target, err := c.Target("w-1")
	if err != nil {
		t.Fatal(err)
	}
	vault := c.Vault
	vault.Cluster = "mercury"
	kc := kube.Cluster{Name: "mercury", Kubeconfig: c.Kubernetes.Kubeconfig}
	for _, in := range []any{hostInput{Target: target}, &hostInput{Target: target}, vaultInput{Vault: vault}, kubeInput{Cluster: kc, Node: "w-1"}, "no struct", struct{ N int }{1}} {
		if err := g.Check(in); err != nil {
			t.Errorf("%T: %v", in, err)
		}
	}
	// Inputs scheduled before they named their cluster: allowed when
	// the worker's inventories give exactly them.
	legacy, legacyVault := target, vault
	legacy.Cluster, legacyVault.Cluster = "", ""
	if err := g.Check(hostInput{Target: legacy}); err != nil {
		t.Errorf("an unnamed cluster's own target: %v", err)
	}
	if err := g.Check(vaultInput{Vault: legacyVault}); err != nil {
		t.Errorf("an unnamed cluster's own Vault: %v", err)
	}

	change := func(f func(*sshpool.Target)) sshpool.Target {
		t := target
		f(&t)
		return t
	}
	changeVault := func(f func(*inventory.Vault)) inventory.Vault {
		v := vault
		f(&v)
		return v
	}
	for name, c := range map[string]struct {
		in   any
		want string
	}{
		"another key":         {hostInput{Target: change(func(t *sshpool.Target) { t.IdentityFile = "/home/eve/.ssh/id" })}, `the run's ssh.identityFile "/home/eve/.ssh/id" is not the worker's`},
		"the agent instead":   {hostInput{Target: change(func(t *sshpool.Target) { t.IdentityFile = "" })}, `ssh.identityFile ""`},
		"another known_hosts": {hostInput{Target: change(func(t *sshpool.Target) { t.KnownHostsFile = "/dev/null" })}, "ssh.knownHostsFile"},
		"another address":     {hostInput{Target: change(func(t *sshpool.Target) { t.Address = "203.0.113.9" })}, `the run's address "203.0.113.9"`},
		"another port":        {hostInput{Target: change(func(t *sshpool.Target) { t.Port = 22 })}, `port "22" is not the worker's ("2222")`},
		"root":                {hostInput{Target: change(func(t *sshpool.Target) { t.User, t.Become = "root", "" })}, "ssh user"},
		"a host not listed":   {hostInput{Target: change(func(t *sshpool.Target) { t.Node = "w-9" })}, `has no host "w-9"`},
		"a Vault signer": {hostInput{Target: change(func(t *sshpool.Target) {
			t.VaultCA = &sshpool.VaultCA{Address: "https://eve:8200", Mount: "ssh", Role: "root"}
		})}, "ssh.vaultSigner"},
		"another cluster":           {hostInput{Target: change(func(t *sshpool.Target) { t.Cluster = "venus" })}, `does not serve cluster "venus"`},
		"an unknown host":           {hostInput{Target: change(func(t *sshpool.Target) { t.Cluster, t.Address = "", "203.0.113.9" })}, "no inventory of this worker reaches it"},
		"another Vault":             {vaultInput{Vault: changeVault(func(v *inventory.Vault) { v.Address = "https://eve:8200" })}, "vault.address"},
		"another token file":        {vaultInput{Vault: changeVault(func(v *inventory.Vault) { v.TokenFile = "/etc/shadow" })}, `the run's vault.tokenFile "/etc/shadow"`},
		"the worker's $VAULT_TOKEN": {vaultInput{Vault: changeVault(func(v *inventory.Vault) { v.TokenFile = "" })}, "vault.tokenFile"},
		"another CA file":           {vaultInput{Vault: changeVault(func(v *inventory.Vault) { v.CAFile = "/tmp/ca.pem" })}, "vault.caFile"},
		"another KV mount":          {vaultInput{Vault: changeVault(func(v *inventory.Vault) { v.KV = "other" })}, "vault.kv"},
		"an unnamed Vault":          {vaultInput{Vault: changeVault(func(v *inventory.Vault) { v.Cluster, v.Address = "", "https://eve:8200" })}, "no inventory of this worker names the run's Vault"},
		"another kubeconfig":        {kubeInput{Cluster: kube.Cluster{Name: "mercury", Kubeconfig: "/root/.kube/config"}}, "kubernetes.kubeconfig"},
		"another context":           {kubeInput{Cluster: kube.Cluster{Name: "mercury", Kubeconfig: kc.Kubeconfig, Context: "prod"}}, "kubernetes.context"},
		"another kube cluster":      {kubeInput{Cluster: kube.Cluster{Name: "venus", Kubeconfig: kc.Kubeconfig}}, `does not serve cluster "venus"`},
	} {
		err := g.Check(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
	if err := (&Guard{}).Check(hostInput{Target: target}); err == nil || !strings.Contains(err.Error(), "it serves: none") {
		t.Errorf("a worker without inventories: %v", err)
	}
}

// The guard stands in front of every activity: a refused input never
// reaches the activity, fails once as CredentialRefused and leaves an
// audit line naming the run.
func TestGuardRefusesBeforeTheActivityRuns(t *testing.T) {
	f, _ := registry(t)
	c, _ := f.Cluster("mercury")
	target, _ := c.Target("cp-1")
	var logs bytes.Buffer
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{
		&Guard{Registry: f, Logger: slog.New(slog.NewTextHandler(&logs, nil))}}})
	ran := 0
	env.RegisterActivityWithOptions(func(_ context.Context, in hostInput) (string, error) {
		ran++
		return "ran " + in.Command, nil
	}, activity.RegisterOptions{Name: "host.run"})

	v, err := env.ExecuteActivity("host.run", hostInput{Target: target, Command: "true"})
	var out string
	if err != nil || v.Get(&out) != nil || out != "ran true" {
		t.Fatalf("the worker's own target: %v %q", err, out)
	}
	target.IdentityFile = "/home/eve/.ssh/id"
	_, err = env.ExecuteActivity("host.run", hostInput{Target: target, Command: "id"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrType || !app.NonRetryable() {
		t.Fatalf("another key: %v", err)
	}
	if ran != 1 {
		t.Errorf("the activity ran %d times, want once (the allowed call)", ran)
	}
	if l := logs.String(); !strings.Contains(l, "action refused") || !strings.Contains(l, "audit=true") ||
		!strings.Contains(l, "activity=host.run") || !strings.Contains(l, "ssh.identityFile") {
		t.Errorf("audit line: %s", l)
	}
}

// adminKubeconfig is what bootstrap saves: render.kubeconfig of an admin
// certificate, for server.
func adminKubeconfig(t *testing.T, server string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kedge-admin"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	out, err := render.Kubeconfig(render.KubeconfigInput{ClusterName: "mercury", Server: server, CACert: cert, User: "kedge-admin",
		ClientCert: cert, ClientKey: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// A key holder saves a kubeconfig at the worker's own path (the path is
// the worker's, so the path check passes) whose server is theirs: every
// later kube action of every run on the cluster (other operators'
// drains) would go to them. The guard refuses any server but the
// inventory's, and anything but embedded certificates.
func TestGuardSavesOnlyTheInventorysAPIServer(t *testing.T) {
	f, dir := registry(t)
	g := &Guard{Registry: f}
	c, _ := f.Cluster("mercury")
	kc := kube.Cluster{Name: "mercury", Kubeconfig: c.Kubernetes.Kubeconfig}
	save := func(server string) kube.SaveKubeconfigInput {
		return kube.SaveKubeconfigInput{Cluster: kc, Content: adminKubeconfig(t, server)}
	}
	if err := g.Check(save("https://10.0.0.1:6443")); err != nil {
		t.Errorf("a controller's API server: %v", err)
	}
	for _, server := range []string{"https://203.0.113.9:6443", "https://10.0.0.1:6444", "https://10.0.0.2:6443"} {
		err := g.Check(save(server))
		if err == nil || !strings.Contains(err.Error(), "is not this cluster's API server") || !strings.Contains(err.Error(), server) {
			t.Errorf("the caller's server %s: %v", server, err)
		}
	}
	withExec := strings.Replace(adminKubeconfig(t, "https://10.0.0.1:6443"), "    client-certificate-data:",
		"    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}\n    client-certificate-data:", 1)
	if err := g.Check(kube.SaveKubeconfigInput{Cluster: kc, Content: withExec}); err == nil || !strings.Contains(err.Error(), "users[kedge-admin].exec") {
		t.Errorf("an exec plugin at the inventory's server: %v", err)
	}
	// An inventory that names its server (a load balancer, say).
	writeFile(t, dir, "mercury.yaml", strings.Replace(mercury, "kubernetes: {kubeconfig: admin.conf}",
		`kubernetes: {kubeconfig: admin.conf, server: "https://api.mercury:443"}`, 1))
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(filepath.Join(dir, "mercury.yaml"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(save("https://api.mercury:443")); err != nil {
		t.Errorf("the inventory's kubernetes.server: %v", err)
	}
	if err := g.Check(save("https://api.mercury:6443")); err == nil {
		t.Error("another port of the inventory's server was allowed")
	}
}
