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
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/runbooks/inventory"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/actions/target"
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
	Target  target.SSH `json:"target"`
	Command string     `json:"command"`
}

type vaultInput struct {
	Vault inventory.Vault `json:"vault"`
}

type kubeInput struct {
	Cluster target.Kube `json:"cluster"`
	Node    string      `json:"node"`
}

// resolved runs the guard over an input and returns what the action
// would get.
func resolved[T any](t *testing.T, g *Guard, in T) (T, error) {
	t.Helper()
	out, err := g.Resolve(in)
	if err != nil {
		var zero T
		return zero, err
	}
	return out.(T), nil
}

// Whatever a run says of a target, the action gets the worker's own: the
// references a run sends are filled in from the worker's inventory, and
// an input that spells out another key, address, user, Vault or
// kubeconfig (a forged one, or one sent before runs carried references
// only) gets the worker's as well.
func TestGuardGivesOnlyTheWorkersOwn(t *testing.T) {
	f, _ := registry(t)
	g := &Guard{Registry: f}
	c, _ := f.Cluster("mercury")
	own, err := c.Target("w-1")
	if err != nil {
		t.Fatal(err)
	}
	ownVault := c.Vault
	ownVault.Cluster = "mercury"
	ownKube := target.Kube{Name: "mercury", Kubeconfig: c.Kubernetes.Kubeconfig}
	if own.IdentityFile == "" || own.Port != 2222 || own.User != "core" || own.Become != "sudo" || ownVault.TokenFile == "" || ownKube.Kubeconfig == "" {
		t.Fatalf("the fixture lost its point: %+v %+v %+v", own, ownVault, ownKube)
	}

	forge := func(f func(*target.SSH)) target.SSH {
		t := own
		f(&t)
		return t
	}
	forgeVault := func(f func(*inventory.Vault)) inventory.Vault {
		v := ownVault
		f(&v)
		return v
	}
	hosts := map[string]target.SSH{
		"the reference a run sends":                                    own.Ref(),
		"the worker's own, spelled out (a run sent before references)": own,
		"another key":         forge(func(t *target.SSH) { t.IdentityFile = "/home/eve/.ssh/id" }),
		"the agent instead":   forge(func(t *target.SSH) { t.IdentityFile = "" }),
		"another known_hosts": forge(func(t *target.SSH) { t.KnownHostsFile = "/dev/null" }),
		"another address":     forge(func(t *target.SSH) { t.Address = "203.0.113.9" }),
		"another port":        forge(func(t *target.SSH) { t.Port = 22 }),
		"root":                forge(func(t *target.SSH) { t.User, t.Become = "root", "" }),
		"a Vault signer": forge(func(t *target.SSH) {
			t.VaultCA = &target.VaultCA{Address: "https://eve:8200", Mount: "ssh", Role: "root"}
		}),
	}
	for name, in := range hosts {
		got, err := resolved(t, g, hostInput{Target: in, Command: "true"})
		if err != nil || !reflect.DeepEqual(got.Target, own) || got.Command != "true" {
			t.Errorf("%s: the action got %+v, %v; want the worker's own %+v", name, got.Target, err, own)
		}
		// A pointer to an input too.
		if got, err := resolved(t, g, &hostInput{Target: in}); err != nil || !reflect.DeepEqual(got.Target, own) {
			t.Errorf("%s, by pointer: %+v, %v", name, got, err)
		}
	}
	vaults := map[string]inventory.Vault{
		"the reference a run sends": {Cluster: "mercury"},
		"another Vault":             forgeVault(func(v *inventory.Vault) { v.Address = "https://eve:8200" }),
		"another token file":        forgeVault(func(v *inventory.Vault) { v.TokenFile = "/etc/shadow" }),
		"the worker's $VAULT_TOKEN": forgeVault(func(v *inventory.Vault) { v.TokenFile = "" }),
		"another CA file":           forgeVault(func(v *inventory.Vault) { v.CAFile = "/tmp/ca.pem" }),
		"another KV mount":          forgeVault(func(v *inventory.Vault) { v.KV = "other" }),
	}
	for name, in := range vaults {
		if got, err := resolved(t, g, vaultInput{Vault: in}); err != nil || got.Vault != ownVault {
			t.Errorf("Vault, %s: the action got %+v, %v; want %+v", name, got.Vault, err, ownVault)
		}
	}
	for name, in := range map[string]target.Kube{
		"the reference a run sends": {Name: "mercury"},
		"another kubeconfig":        {Name: "mercury", Kubeconfig: "/root/.kube/config"},
		"another context":           {Name: "mercury", Kubeconfig: ownKube.Kubeconfig, Context: "prod"},
	} {
		if got, err := resolved(t, g, kubeInput{Cluster: in, Node: "w-1"}); err != nil || got.Cluster != ownKube || got.Node != "w-1" {
			t.Errorf("kube, %s: the action got %+v, %v; want %+v", name, got, err, ownKube)
		}
	}
	for _, in := range []any{"no struct", struct{ N int }{1}} {
		if got, err := g.Resolve(in); err != nil || !reflect.DeepEqual(got, in) {
			t.Errorf("%T: %v, %v", in, got, err)
		}
	}

	// Inputs sent before they named their cluster: resolved only when
	// one of the worker's inventories gives exactly them.
	legacy, legacyVault := own, ownVault
	legacy.Cluster, legacyVault.Cluster = "", ""
	if got, err := resolved(t, g, hostInput{Target: legacy}); err != nil || !reflect.DeepEqual(got.Target, own) {
		t.Errorf("an unnamed cluster's own target: %+v, %v", got.Target, err)
	}
	if got, err := resolved(t, g, vaultInput{Vault: legacyVault}); err != nil || got.Vault != ownVault {
		t.Errorf("an unnamed cluster's own Vault: %+v, %v", got.Vault, err)
	}

	for name, c := range map[string]struct {
		in   any
		want string
	}{
		"a host not listed":    {hostInput{Target: target.SSH{Cluster: "mercury", Node: "w-9"}}, `has no host "w-9"`},
		"another cluster":      {hostInput{Target: target.SSH{Cluster: "venus", Node: "w-1"}}, `does not serve cluster "venus"`},
		"an unknown host":      {hostInput{Target: forge(func(t *target.SSH) { t.Cluster, t.Address = "", "203.0.113.9" })}, "no inventory of this worker reaches the host"},
		"an unnamed Vault":     {vaultInput{Vault: forgeVault(func(v *inventory.Vault) { v.Cluster, v.Address = "", "https://eve:8200" })}, "no inventory of this worker names that Vault"},
		"no Vault named":       {vaultInput{}, "no inventory of this worker names that Vault"},
		"another kube cluster": {kubeInput{Cluster: target.Kube{Name: "venus"}}, `does not serve cluster "venus"`},
	} {
		if _, err := g.Resolve(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
	if _, err := (&Guard{}).Resolve(hostInput{Target: own.Ref()}); err == nil || !strings.Contains(err.Error(), "it serves: none") {
		t.Errorf("a worker without inventories: %v", err)
	}
}

// A cluster whose inventory names no Vault or kubeconfig: an action that
// needs one is refused rather than left to the client's defaults
// ($VAULT_ADDR, ~/.kube/config).
func TestGuardRefusesWhatTheInventoryDoesNotName(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "bare.yaml", strings.NewReplacer("name: mercury", "name: bare",
		"kubernetes: {kubeconfig: admin.conf}\n", "", "vault: {address: \"https://vault.mercury:8200\", tokenFile: vault-token}\n", "").Replace(mercury))
	f, err := Load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Registry: f}
	if _, err := g.Resolve(vaultInput{Vault: inventory.Vault{Cluster: "bare", Address: "https://eve:8200"}}); err == nil || !strings.Contains(err.Error(), "names no vault.address") {
		t.Errorf("Vault: %v", err)
	}
	if _, err := g.Resolve(kubeInput{Cluster: target.Kube{Name: "bare", Kubeconfig: "/root/.kube/config"}}); err == nil || !strings.Contains(err.Error(), "names no kubernetes.kubeconfig") {
		t.Errorf("kube: %v", err)
	}
}

// The guard stands in front of every activity: the activity gets the
// worker's own target whatever the run sent; an input naming a cluster
// the worker does not serve never reaches the activity, fails once as
// CredentialRefused and leaves an audit line naming the run.
func TestGuardStandsBeforeTheActivity(t *testing.T) {
	f, _ := registry(t)
	c, _ := f.Cluster("mercury")
	own, _ := c.Target("cp-1")
	var logs bytes.Buffer
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{
		&Guard{Registry: f, Logger: slog.New(slog.NewTextHandler(&logs, nil))}}})
	var got []target.SSH
	env.RegisterActivityWithOptions(func(_ context.Context, in hostInput) (string, error) {
		got = append(got, in.Target)
		return "ran " + in.Command, nil
	}, activity.RegisterOptions{Name: "host.run"})

	forged := own
	forged.IdentityFile, forged.Address = "/home/eve/.ssh/id", "203.0.113.9"
	for _, in := range []target.SSH{own.Ref(), forged} {
		v, err := env.ExecuteActivity("host.run", hostInput{Target: in, Command: "true"})
		var out string
		if err != nil || v.Get(&out) != nil || out != "ran true" {
			t.Fatalf("%+v: %v %q", in, err, out)
		}
	}
	for i, tg := range got {
		if !reflect.DeepEqual(tg, own) {
			t.Errorf("call %d: the activity got %+v, want the worker's own %+v", i, tg, own)
		}
	}
	_, err := env.ExecuteActivity("host.run", hostInput{Target: target.SSH{Cluster: "venus", Node: "cp-1"}, Command: "id"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, ErrType) || !app.NonRetryable() {
		t.Fatalf("another cluster: %v", err)
	}
	if len(got) != 2 {
		t.Errorf("the activity ran %d times, want twice (the served cluster's calls)", len(got))
	}
	if l := logs.String(); !strings.Contains(l, "action refused") || !strings.Contains(l, "audit=true") ||
		!strings.Contains(l, "activity=host.run") || !strings.Contains(l, "venus") {
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
	out, err := nodefiles.Kubeconfig(render.KubeconfigInput{ClusterName: "mercury", Server: server, CACert: cert, User: "kedge-admin",
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
	kc := target.Kube{Name: "mercury", Kubeconfig: c.Kubernetes.Kubeconfig}
	save := func(server string) kube.SaveKubeconfigInput {
		return kube.SaveKubeconfigInput{Cluster: kc, Content: adminKubeconfig(t, server)}
	}
	if _, err := g.Resolve(save("https://10.0.0.1:6443")); err != nil {
		t.Errorf("a controller's API server: %v", err)
	}
	for _, server := range []string{"https://203.0.113.9:6443", "https://10.0.0.1:6444", "https://10.0.0.2:6443"} {
		_, err := g.Resolve(save(server))
		if err == nil || !strings.Contains(err.Error(), "is not this cluster's API server") || !strings.Contains(err.Error(), server) {
			t.Errorf("the caller's server %s: %v", server, err)
		}
	}
	withExec := strings.Replace(adminKubeconfig(t, "https://10.0.0.1:6443"), "    client-certificate-data:",
		"    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}\n    client-certificate-data:", 1)
	if _, err := g.Resolve(kube.SaveKubeconfigInput{Cluster: kc, Content: withExec}); err == nil || !strings.Contains(err.Error(), "users[kedge-admin].exec") {
		t.Errorf("an exec plugin at the inventory's server: %v", err)
	}
	// An inventory that names its server (a load balancer, say).
	writeFile(t, dir, "mercury.yaml", strings.Replace(mercury, "kubernetes: {kubeconfig: admin.conf}",
		`kubernetes: {kubeconfig: admin.conf, server: "https://api.mercury:443"}`, 1))
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(filepath.Join(dir, "mercury.yaml"), later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Resolve(save("https://api.mercury:443")); err != nil {
		t.Errorf("the inventory's kubernetes.server: %v", err)
	}
	if _, err := g.Resolve(save("https://api.mercury:6443")); err == nil {
		t.Error("another port of the inventory's server was allowed")
	}
}
