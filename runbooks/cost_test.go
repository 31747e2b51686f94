package runbooks

import (
	"fmt"
	"testing"

	"kedge.dev/kedge/runbooks/inventory"
)

// The built-in runbooks' expressions stay within the cost limit on a
// cluster of a thousand nodes: kubelet-image-swap over every node plans
// (its rollouts' over: renders) without hitting it.
func TestBuiltinExpressionsFitTheCostLimitAtAThousandNodes(t *testing.T) {
	c := &inventory.Cluster{Name: "big", SSH: inventory.SSH{KnownHostsFile: "known_hosts"}}
	for i := range 1000 {
		n := inventory.Node{Name: fmt.Sprintf("node-%04d", i), Role: inventory.RoleWorker, Address: fmt.Sprintf("10.0.%d.%d", i/250, 1+i%250)}
		if i < 3 {
			n.Role = inventory.RoleController
			c.Controllers = append(c.Controllers, n)
			continue
		}
		c.Workers = append(c.Workers, n)
	}
	l, err := (&Library{Builtin: Builtin}).Load("kubelet-image-swap", c)
	if err != nil {
		t.Fatal(err)
	}
	params, err := ResolveParams(l.Runbook, map[string]any{"image": "registry.example/kubelet:v1.36.0", "nodes": "all"}, c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := MakePlan(l, params, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Steps {
		if s.ID == "workers" && len(s.Hosts) != 997 {
			t.Errorf("workers rollout over %d nodes, want 997", len(s.Hosts))
		}
	}
}
