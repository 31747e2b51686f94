package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"
)

// inspect reads each host through the worker of its site, sending only
// the host's reference; a host that cannot be read is reported, not
// fatal; the Node looked up is the one the kubelet registers as.
func TestInspectReadsEachHostOnItsSite(t *testing.T) {
	docs, err := source.Parse("inventory.yaml", []byte(sitesInventory+"kubernetes: {kubeconfig: /k/admin.conf}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := inventory.Decode(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	asOnAWorker(env)
	Register(env)
	var mu sync.Mutex
	queues := map[string]string{}
	env.RegisterActivityWithOptions(func(ctx context.Context, in host.LayoutInput) (host.LayoutResult, error) {
		mu.Lock()
		queues[in.Target.Node] = activity.GetInfo(ctx).TaskQueue
		mu.Unlock()
		if in.Target.Cluster != "mercury" || in.Target.Address != "" || in.Target.IdentityFile != "" {
			t.Errorf("the run sent more than a reference: %+v", in.Target)
		}
		switch in.Target.Node {
		case "worker-2":
			return host.LayoutResult{}, temporal.NewNonRetryableApplicationError("ssh: handshake failed", "SSHAuth", nil)
		case "worker-1":
			// A kubelet that registers under another name.
			return host.LayoutResult{Kind: layout.KindKedge, Role: "worker", NodeName: "w1.example", Kubelet: &layout.Kubelet{}}, nil
		}
		return host.LayoutResult{Kind: layout.KindKedge, Role: "controller", NodeName: in.Target.Node}, nil
	}, activity.RegisterOptions{Name: host.LayoutAction})
	env.RegisterActivityWithOptions(func(_ context.Context, in kube.NodeInput) (kube.GetNodeResult, error) {
		if in.Cluster.Name != "mercury" || in.Cluster.Kubeconfig != "" {
			t.Errorf("the run sent more than a reference: %+v", in.Cluster)
		}
		return kube.GetNodeResult{Exists: in.Node == "controller-1", Ready: true, KubeletVersion: "v1.35.4", InternalIP: "10.0.0.1"}, nil
	}, activity.RegisterOptions{Name: kube.GetNodeAction})

	registerAdmit(env)
	env.ExecuteWorkflow(InspectWorkflow, InspectInput{Cluster: *cluster, Nodes: []string{"controller-1", "worker-1", "worker-2"}, Admission: Admission{IssuedAt: time.Now()}})
	var res InspectResult
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"controller-1": "site-a", "worker-1": "site-a", "worker-2": "site-b"}; len(queues) != 3 ||
		queues["controller-1"] != want["controller-1"] || queues["worker-1"] != want["worker-1"] || queues["worker-2"] != want["worker-2"] {
		t.Errorf("queues %v, want %v", queues, want)
	}
	if len(res.Hosts) != 3 {
		t.Fatalf("reports: %+v", res.Hosts)
	}
	c, w1, w2 := res.Hosts[0], res.Hosts[1], res.Hosts[2]
	if c.Node != "controller-1" || c.Layout == nil || c.API == nil || !c.API.Found || c.API.InternalIP != "10.0.0.1" || c.Error != "" {
		t.Errorf("controller-1: %+v (api %+v)", c, c.API)
	}
	if w1.API == nil || w1.API.Name != "w1.example" || w1.API.Found || !strings.Contains(w1.NodeNameMismatch, "w1.example") {
		t.Errorf("worker-1 (registers as w1.example): %+v (api %+v)", w1, w1.API)
	}
	if w2.Layout != nil || !strings.Contains(w2.Error, "handshake failed") {
		t.Errorf("worker-2 (unreachable): %+v", w2)
	}
}

func TestInspectRefusesAHostNotInTheInventory(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	asOnAWorker(env)
	Register(env)
	registerAdmit(env)
	env.ExecuteWorkflow(InspectWorkflow, InspectInput{Cluster: inventory.Cluster{Name: "mercury"}, Nodes: []string{"eve"}, Admission: Admission{IssuedAt: time.Now()}})
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != errtype.InvalidInput || !strings.Contains(app.Error(), `no node "eve"`) {
		t.Errorf("got %v", err)
	}
}
