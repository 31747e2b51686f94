package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/plan"
)

// InspectWorkflow reads hosts' layouts and their Nodes: what `kedge
// inspect` starts. It runs the same actions as a runbook's steps, on the
// same workers (a node's site queue included), through the same guard,
// and changes nothing.
const InspectWorkflow = "kedge.inspect"

// InspectInput names the hosts to read.
type InspectInput struct {
	Cluster inventory.Cluster `json:"cluster"`
	Nodes   []string          `json:"nodes"`
	// Admission is when `kedge inspect` sealed the input: a copy started
	// again later, or under the same ID, reads nothing.
	Admission Admission `json:"admission,omitzero"`
}

// InspectResult holds one report per host, in the order asked.
type InspectResult struct {
	Hosts []HostReport `json:"hosts"`
}

// HostReport is what inspect found on one inventory node.
type HostReport struct {
	Node   string         `json:"node"`
	Layout *layout.Layout `json:"layout,omitempty"`
	// API is the Node the kubelet registers as, as the API server knows
	// it (when the inventory has a kubeconfig).
	API *APINode `json:"api,omitempty"`
	// APIError is why the API server could not say.
	APIError string `json:"apiError,omitempty"`
	// NodeNameMismatch says why runbooks would refuse the host: its
	// kubelet registers another Node name than the inventory gives it
	// (layout.CheckNodeName).
	NodeNameMismatch string `json:"nodeNameMismatch,omitempty"`
	Error            string `json:"error,omitempty"`
}

// APINode is a Node as the API server reports it.
type APINode struct {
	Name           string `json:"name"`
	Found          bool   `json:"found"`
	Ready          bool   `json:"ready"`
	KubeletVersion string `json:"kubeletVersion,omitempty"`
	InternalIP     string `json:"internalIP,omitempty"`
}

// InspectWorkflowID is kedge.inspect/CLUSTER/UNIQUE: under the cluster,
// where chat and the Web UI's authorization read it, and never a
// runbook's run.
func InspectWorkflowID(cluster, unique string) string {
	return RunWorkflowID(InspectWorkflow, cluster, unique)
}

// inspectAdmissionChange versions inspect's admission check.
const inspectAdmissionChange = "kedge-inspect-admission"

// inspectAtOnce bounds the hosts read at the same time.
const inspectAtOnce = 16

// Inspect reads every host's layout and, when the inventory names a
// kubeconfig, the Node its kubelet registers as. A host that cannot be
// read is reported, not failed: the run fails only on bad input.
func Inspect(ctx workflow.Context, in InspectInput) (InspectResult, error) {
	res := InspectResult{Hosts: make([]HostReport, len(in.Nodes))}
	if err := admitTool(ctx, inspectAdmissionChange, in.Admission.IssuedAt); err != nil {
		return res, err
	}
	for _, name := range in.Nodes {
		if _, ok := in.Cluster.Node(name); !ok {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no node %q in cluster %s", name, in.Cluster.Name), errtype.InvalidInput, nil)
		}
	}
	sc := plan.Scope{Cluster: &in.Cluster}
	vars := sc.Vars(nil)
	sem := workflow.NewSemaphore(ctx, inspectAtOnce)
	wg := workflow.NewWaitGroup(ctx)
	for i, name := range in.Nodes {
		r := &res.Hosts[i]
		r.Node = name
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			if err := sem.Acquire(ctx, 1); err != nil {
				r.Error = errorMessage(err)
				return
			}
			defer sem.Release(1)
			inspectHost(ctx, sc, vars, r)
		})
	}
	wg.Wait(ctx)
	return res, nil
}

// inspectHost fills one host's report.
func inspectHost(ctx workflow.Context, sc plan.Scope, vars map[string]any, r *HostReport) {
	var l layout.Layout
	if err := inspectCall(ctx, sc, vars, host.LayoutAction, r.Node, "", &l); err != nil {
		r.Error = errorMessage(err)
		return
	}
	r.Layout = &l
	if err := l.CheckNodeName(r.Node, sc.Cluster.KubeName(r.Node)); err != nil {
		r.NodeNameMismatch = err.Error()
	}
	if sc.Cluster.Kubernetes.Kubeconfig == "" || l.NodeName == "" {
		return
	}
	// The Node the kubelet registers as, which may not be the one the
	// inventory gives it.
	var n kube.GetNodeResult
	if err := inspectCall(ctx, sc, vars, kube.GetNodeAction, r.Node, l.NodeName, &n); err != nil {
		r.APIError = errorMessage(err)
		return
	}
	r.API = &APINode{Name: l.NodeName, Found: n.Exists, Ready: n.Ready, KubeletVersion: n.KubeletVersion, InternalIP: n.InternalIP}
}

// inspectCall runs one read-only action on a host, as a runbook step
// would (plan.Scope.Call: its input, its targets, its site's queue), with
// a retry for a connection that drops. nodeName, when set, is the Node a
// kube action looks up.
func inspectCall(ctx workflow.Context, sc plan.Scope, vars map[string]any, name, node, nodeName string, out any) error {
	action, ok := actions.Lookup(name)
	if !ok {
		return fmt.Errorf("no action %s", name)
	}
	call, err := sc.Call("inspect", action, node, nil, vars)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	if nodeName != "" {
		call.Input["node"] = nodeName
	}
	actx := workflow.WithActivityOptions(onSite(ctx, call.TaskQueue), workflow.ActivityOptions{
		StartToCloseTimeout: action.Timeout,
		HeartbeatTimeout:    action.Heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: time.Second},
		Summary:             activitySummary("inspect", action, node, call.Input),
	})
	return workflow.ExecuteActivity(actx, action.Name, call.Input).Get(ctx, out)
}
