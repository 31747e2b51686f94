package workflows

import (
	"context"
	"testing"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/actions/kube"
)

// Kubernetes actions act on the Node's name (the inventory's nodeName),
// host actions on the inventory's host of that name.
func TestKubeActionsGetTheNodeName(t *testing.T) {
	env, f := newEnv(t)
	var got []string
	env.RegisterActivityWithOptions(func(ctx context.Context, in kube.NodeInput) (kube.NodeResult, error) {
		got = append(got, in.Node)
		return kube.NodeResult{Changed: true}, nil
	}, activity.RegisterOptions{Name: kube.CordonAction})
	in := input(t, `apiVersion: kedge/v1
kind: Runbook
metadata: {name: cordon-then-run}
params:
  node: {type: string, required: true}
steps:
  - {id: cordon, action: kube.cordon, on: "${ params.node }"}
  - {id: run, needs: [cordon], action: host.run, on: "${ params.node }", with: {command: "echo $NODE_NAME", env: {NODE_NAME: "${ cluster.nodes.filter(n, n.name == params.node)[0].nodeName }"}}}
`, map[string]any{"node": "worker-1"})
	in.Cluster.Kubernetes.Kubeconfig = "/k/kubeconfig"
	in.Cluster.Workers[0].NodeName = "worker-1.mercury.example"
	env.ExecuteWorkflow(Runbook, in)
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "worker-1.mercury.example" {
		t.Errorf("kube.cordon got node %v, want worker-1.mercury.example", got)
	}
	if calls := f.Calls(); len(calls) != 1 || calls[0] != "run echo worker-1.mercury.example@worker-1" {
		t.Errorf("host calls %q", calls)
	}
}
