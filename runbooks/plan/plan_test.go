package plan

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testCluster(t testing.TB) *inventory.Cluster {
	t.Helper()
	c, err := inventory.LoadFile("../testdata/inventory.yaml")
	if err != nil {
		t.Fatalf("load inventory: %v", err)
	}
	return c
}

func load(t testing.TB, path string, cluster *inventory.Cluster) (*runbooks.Runbook, map[string]runbooks.Runbook) {
	t.Helper()
	lib := &runbooks.Library{Builtin: runbooks.Builtin}
	var l *runbooks.Loaded
	var err error
	if strings.Contains(path, "/") {
		l, err = lib.LoadFile(path, cluster)
	} else {
		l, err = lib.Load(path, cluster)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l.Runbook, l.ChildValues()
}

func TestPlanResolvesHostsAndWaves(t *testing.T) {
	cluster := testCluster(t)
	rb, children := load(t, "../testdata/good/deploy.yaml", cluster)
	p, err := Compile(rb, children, map[string]any{"message": "hi"}, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Write(&b, p)
	path := filepath.Join("testdata", "deploy.plan.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// A secret param's value appears nowhere in a plan, printed or as JSON,
// not even inside an action's input built from it; the run still starts
// with the value itself.
func TestPlanMasksSecretParams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: kedge/v1
kind: Runbook
metadata: {name: secret}
params:
  token: {type: string, required: true, secret: true}
steps:
  - id: use
    action: host.run
    on: worker-1
    with: {command: "login", env: {TOKEN: "Bearer ${ params.token }"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := testCluster(t)
	rb, children := load(t, path, cluster)
	p, err := Compile(rb, children, map[string]any{"token": "hunter2"}, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Write(&b, p)
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String()+string(js), "hunter2") {
		t.Errorf("secret shown:\n%s\n%s", b.String(), js)
	}
	if env := p.Steps[0].Calls[0].Input["env"].(map[string]any); env["TOKEN"] != "Bearer "+SecretMask {
		t.Errorf("input env: %v", env)
	}
	if p.StartParams()["token"] != "hunter2" {
		t.Error("masking changed the params the run starts with")
	}
}

func bigCluster(n int) *inventory.Cluster {
	c := &inventory.Cluster{Name: "big", SSH: inventory.SSH{KnownHostsFile: "known_hosts"}, Kubernetes: inventory.Kubernetes{Kubeconfig: "admin.conf"}}
	for i := range n {
		node := inventory.Node{Name: fmt.Sprintf("node-%04d", i), Role: inventory.RoleWorker, Address: fmt.Sprintf("10.0.%d.%d", i/250, 1+i%250)}
		if i < 3 {
			node.Role = inventory.RoleController
			c.Controllers = append(c.Controllers, node)
			continue
		}
		c.Workers = append(c.Workers, node)
	}
	return c
}

// The built-in runbooks' expressions stay within the cost limit on a
// cluster of a thousand nodes: kubelet-image-swap over every node plans
// (its rollouts' over: renders, and each item's runbook) without hitting
// it.
func TestBuiltinExpressionsFitTheCostLimitAtAThousandNodes(t *testing.T) {
	c := bigCluster(1000)
	rb, children := load(t, "kubelet-image-swap", c)
	p, err := Compile(rb, children, map[string]any{"image": "registry.example/kubelet:v1.36.0", "nodes": "all"}, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Steps {
		if s.ID == "workers" && (len(s.Hosts) != 997 || len(s.Items) != 997) {
			t.Errorf("workers rollout over %d nodes (%d planned), want 997", len(s.Hosts), len(s.Items))
		}
	}
}

// BenchmarkCompileAThousandNodes is what `kedge run` and `kedge plan` pay
// before a swap of a thousand nodes starts.
func BenchmarkCompileAThousandNodes(b *testing.B) {
	c := bigCluster(1000)
	rb, children := load(b, "kubelet-image-swap", c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(rb, children, map[string]any{"image": "registry.example/kubelet:v1.36.0", "nodes": "all"}, c); err != nil {
			b.Fatal(err)
		}
	}
}
