package workflows

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"

	"kedge.dev/kedge/internal/searchattr"

	"kedge.dev/kedge/actions/host"
)

// statusLog records the KedgeStatus values a workflow upserts.
type statusLog struct {
	mu  sync.Mutex
	set []string
}

func (l *statusLog) watch(env *testsuite.TestWorkflowEnvironment) {
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if v, ok := sa.GetKeyword(searchattr.StatusKey); ok {
			l.mu.Lock()
			l.set = append(l.set, v)
			l.mu.Unlock()
		}
	}).Return(nil).Maybe()
}

func (l *statusLog) values() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.set)
}

// startIndexed starts the workflow as the CLI does on a namespace with
// Kedge's search attributes.
func startIndexed(t *testing.T, env *testsuite.TestWorkflowEnvironment, in RunbookInput) {
	t.Helper()
	if err := env.SetTypedSearchAttributesOnStart(Describe(in).SearchAttributes); err != nil {
		t.Fatal(err)
	}
}

func TestKedgeStatusFollowsTheRun(t *testing.T) {
	env, _ := newEnv(t)
	var log statusLog
	log.watch(env)
	in := input(t, approvalRunbook, nil)
	startIndexed(t, env, in)
	var u updateResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(ApproveUpdate, "1", &u, bind(t, env, Decision{Step: "gate", Decision: DecisionApprove, By: "alice"}))
	}, time.Minute)
	env.ExecuteWorkflow(Runbook, in)
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	// Started "running" by the client: only changes are upserted.
	want := []string{searchattr.StatusWaitingApproval, searchattr.StatusRunning, searchattr.StatusSucceeded}
	if got := log.values(); !slices.Equal(got, want) {
		t.Errorf("KedgeStatus went %v, want %v", got, want)
	}
}

func TestKedgeStatusFailed(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		return host.RunResult{}, temporal.NewNonRetryableApplicationError("broken", "CommandFailed", nil)
	}
	var log statusLog
	log.watch(env)
	in := input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: breaks}
steps:
  - {id: a, action: host.run, on: worker-1, with: {command: x}}
`, nil)
	startIndexed(t, env, in)
	env.ExecuteWorkflow(Runbook, in)
	if _, err := result(t, env); err == nil {
		t.Fatal("want a failure")
	}
	if got := log.values(); !slices.Equal(got, []string{searchattr.StatusFailed}) {
		t.Errorf("KedgeStatus went %v", got)
	}
}

// A run started without Kedge's search attributes (a namespace without
// them) never upserts one: that would fail its workflow task forever.
func TestNoSearchAttributesWithoutThemAtStart(t *testing.T) {
	env, _ := newEnv(t)
	var log statusLog
	log.watch(env)
	children := recordChildren(env)
	env.ExecuteWorkflow(Runbook, input(t, swapAll, nil, perNode))
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	if got := log.values(); len(got) != 0 {
		t.Errorf("upserted %v without Kedge's attributes at start", got)
	}
	// Its children run as before: typed "runbook", unlabelled.
	for _, c := range children() {
		if c.typ != RunbookWorkflow && c.typ != RolloutWorkflow || c.cluster != "" {
			t.Errorf("child %+v of an unlabelled run", c)
		}
	}
}

type childStart struct {
	id, typ, runbook, node, cluster string
}

func recordChildren(env *testsuite.TestWorkflowEnvironment) func() []childStart {
	var mu sync.Mutex
	var starts []childStart
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, ctx workflow.Context, _ converter.EncodedValues) {
		sa := workflow.GetTypedSearchAttributes(ctx)
		c := childStart{id: info.WorkflowExecution.ID, typ: info.WorkflowType.Name}
		c.runbook, _ = sa.GetKeyword(searchattr.RunbookKey)
		c.node, _ = sa.GetKeyword(searchattr.NodeKey)
		c.cluster, _ = sa.GetKeyword(searchattr.ClusterKey)
		mu.Lock()
		starts = append(starts, c)
		mu.Unlock()
	})
	return func() []childStart {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(starts)
	}
}

func TestChildrenAreTypedAndLabelled(t *testing.T) {
	env, _ := newEnv(t)
	var log statusLog
	log.watch(env)
	children := recordChildren(env)
	in := input(t, swapAll, nil, perNode)
	startIndexed(t, env, in)
	env.ExecuteWorkflow(Runbook, in)
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	got := children()
	want := []childStart{
		{id: "default-test-workflow-id/swap", typ: RolloutWorkflow, runbook: "swap-all", cluster: "mercury"},
		{id: "mercury/node/controller-1", typ: "per-node", runbook: "per-node", node: "controller-1", cluster: "mercury"},
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no child %+v among %+v", w, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d children, want the rollout and 3 nodes: %+v", len(got), got)
	}
}

// Runs begun before the change replay as they ran: children typed
// "runbook", no KedgeStatus upserts.
func TestBeforeTheUIChange(t *testing.T) {
	env, _ := newEnv(t)
	env.OnGetVersion(uiChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	var log statusLog
	log.watch(env)
	children := recordChildren(env)
	in := input(t, swapAll, nil, perNode)
	startIndexed(t, env, in)
	env.ExecuteWorkflow(Runbook, in)
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	for _, c := range children() {
		if c.typ != RunbookWorkflow && c.typ != RolloutWorkflow {
			t.Errorf("child %s typed %s before the change", c.id, c.typ)
		}
	}
	if got := log.values(); len(got) != 0 {
		t.Errorf("upserted %v before the change", got)
	}
}

// A runbook started under its own name runs through the dynamic workflow.
func TestRunbookRunsUnderItsOwnName(t *testing.T) {
	env, f := newEnv(t)
	in := input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: say-hello}
steps:
  - {id: hello, action: host.run, on: worker-1, with: {command: hi}}
`, nil)
	env.ExecuteWorkflow(TypeOf(in.Runbook.Name), in)
	res, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.State != StateSucceeded || !slices.Contains(f.Calls(), "run hi@worker-1") {
		t.Errorf("progress %+v, calls %v", res.Progress, f.Calls())
	}
	env2, _ := newEnv(t)
	env2.ExecuteWorkflow("not-a-runbook", "hello")
	if err := env2.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "not a Kedge runbook") {
		t.Errorf("a stray workflow type: %v", err)
	}
}

func TestTypeOf(t *testing.T) {
	for name, want := range map[string]string{
		"kubelet-image-swap": "kubelet-image-swap",
		"rollout":            RunbookWorkflow,
		"compensate":         RunbookWorkflow,
		"runbook":            RunbookWorkflow,
		"":                   RunbookWorkflow,
	} {
		if got := TypeOf(name); got != want {
			t.Errorf("TypeOf(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestDescribe(t *testing.T) {
	in := input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: node-thing, description: "Does a thing to one node."}
params:
  node: {type: string, required: true}
  token: {type: string, secret: true, default: "s3cr3t-value"}
  note: {type: string, default: "a|b"}
steps:
  - {id: cordon, name: Cordon it, action: kube.cordon, on: "${ params.node }"}
  - {id: gate, needs: [cordon], approval: {prompt: "ok?"}}
`, map[string]any{"node": "worker-2"})
	m := Describe(in)
	if m.WorkflowType != "node-thing" || m.StaticSummary != "node-thing on mercury" {
		t.Errorf("type %q, summary %q", m.WorkflowType, m.StaticSummary)
	}
	for key, want := range map[temporal.SearchAttributeKeyKeyword]string{
		searchattr.ClusterKey: "mercury", searchattr.RunbookKey: "node-thing",
		searchattr.NodeKey: "worker-2", searchattr.StatusKey: searchattr.StatusRunning,
	} {
		if got, _ := m.SearchAttributes.GetKeyword(key); got != want {
			t.Errorf("%s = %q, want %q", key.GetName(), got, want)
		}
	}
	d := m.StaticDetails
	if strings.Contains(d, "s3cr3t") || !strings.Contains(d, "| token | (secret) |") {
		t.Errorf("secret param not masked:\n%s", d)
	}
	for _, want := range []string{"Does a thing to one node.", "| node | `worker-2` |", "`a\\|b`", "- `cordon` Cordon it — kube.cordon", "- `gate` approval (after cordon)"} {
		if !strings.Contains(d, want) {
			t.Errorf("details lack %q:\n%s", want, d)
		}
	}
	// No node param naming a node: no KedgeNode.
	in.Params["node"] = "not-in-the-inventory"
	if _, ok := Describe(in).SearchAttributes.GetKeyword(searchattr.NodeKey); ok {
		t.Error("KedgeNode set for a name outside the inventory")
	}
}

func TestActivitySummaries(t *testing.T) {
	for _, c := range []struct {
		action, host string
		input        map[string]any
		want         string
	}{
		{"kube.drain", "worker-2", nil, "drain worker-2 (step drain)"},
		{"host.write-file", "worker-1", map[string]any{"path": "/etc/kubernetes/kubelet.yaml", "content": "SECRET"}, "write /etc/kubernetes/kubelet.yaml on worker-1 (step drain)"},
		{"host.run", "worker-1", map[string]any{"command": "echo SECRET"}, "run a command on worker-1 (step drain)"},
		{"host.systemd", "worker-1", map[string]any{"unit": "kubelet.service", "action": "restart"}, "restart kubelet.service on worker-1 (step drain)"},
		{"host.write-dropin", "worker-1", map[string]any{"unit": "kubelet.service", "name": "10-image.conf", "environment": map[string]any{"K": "SECRET"}}, "write drop-in /etc/systemd/system/kubelet.service.d/10-image.conf on worker-1 (step drain)"},
		{"host.install-bundle", "controller-1", map[string]any{"files": []any{map[string]any{"path": "/a", "content": "SECRET"}, map[string]any{"path": "/b"}}}, "install 2 files on controller-1 (step drain)"},
		{"kube.wait-node", "worker-2", map[string]any{"kubeletVersion": "v1.35.4"}, "wait for worker-2 Ready with kubelet v1.35.4 (step drain)"},
		{"render.kubeconfig", "", map[string]any{"token": "SECRET", "clientKey": "SECRET"}, "render kubeconfig (step drain)"},
		{"kube.save-kubeconfig", "", map[string]any{"content": "SECRET"}, "save the admin kubeconfig (step drain)"},
		{"host.layout", "worker-1", map[string]any{"require": []any{"kedge"}}, "read the layout on worker-1 (step drain)"},
		{"host.pull-image", "worker-1", map[string]any{"image": "quay.io/poseidon/kubelet:v1.36.1-amd64", "runtime": "docker"}, "pull quay.io/poseidon/kubelet:v1.36.1-amd64 on worker-1 (step drain)"},
		{"kube.install-kube-proxy", "", map[string]any{"image": "registry.k8s.io/kube-proxy:v1.35.4", "server": "https://10.0.0.1:6443"}, "install kube-proxy (step drain)"},
		{"etcd.remove-member", "", map[string]any{"member": "etcd2", "dryRun": true, "caCert": "SECRET"}, "check etcd keeps a quorum without etcd2 (step drain)"},
		{"etcd.add-member", "", map[string]any{"name": "tyc4", "peerURL": "https://tyc4.typhoon.test:2380", "caCert": "SECRET"}, "add etcd member tyc4 (step drain)"},
		{"kube.delete-lost-node", "", map[string]any{"name": "tyc2.typhoon.test"}, "delete node tyc2.typhoon.test (step drain)"},
		{"pki.renew-in-place", "controller-1", map[string]any{"files": map[string]any{"apiserver-key": "/k"}}, "renew certificates in place on controller-1 (step drain)"},
		{"host.check-readable", "controller-1", map[string]any{"files": []any{map[string]any{"path": "/k"}, map[string]any{"path": "/c"}}}, "check 2 files can be read by their processes on controller-1 (step drain)"},
		{"pki.check-ca-life", "", map[string]any{"cas": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}, "check 2 CAs end after the renewal window (step drain)"},
		{"kube.wait-static-pod", "controller-1", map[string]any{"pod": "kube-apiserver", "gone": true}, "wait until static pod kube-apiserver is gone from controller-1 (step drain)"},
		{"host.prepare-node", "worker-9", map[string]any{"modules": []any{"br_netfilter"}, "start": []any{"containerd.service"}}, "prepare worker-9 for its kubelet (step drain)"},
		{"host.prepare-node", "worker-9", map[string]any{"stop": []any{"containerd.service"}, "disable": []any{}}, "take back the units enabled or started on worker-9 (step drain)"},
		{"etcd.snapshot", "", map[string]any{"destination": "offsite", "member": "tyc2", "caCert": "SECRET"}, "take a sealed etcd snapshot from tyc2 into offsite (step drain)"},
		{"etcd.restore-drill", "", map[string]any{"destination": "offsite", "expectKeys": []any{"/registry/SECRET"}}, "restore the newest etcd snapshot into a throwaway etcd and check it (step drain)"},
		{"etcd.restore-drill", "", map[string]any{"destination": "offsite", "snapshot": ""}, "restore the newest etcd snapshot into a throwaway etcd and check it (step drain)"},
		{"etcd.restore-drill", "", map[string]any{"destination": "offsite", "snapshot": "SECRET.snap.kseal"}, "restore the etcd snapshot named into a throwaway etcd and check it (step drain)"},
		{"etcd.restore-plan", "", map[string]any{"destination": "offsite", "snapshot": "latest"}, "read the newest etcd snapshot a restore would bring back (step drain)"},
		{"etcd.restore-plan", "", map[string]any{"destination": "offsite", "snapshot": "SECRET.snap.kseal"}, "read the etcd snapshot named a restore would bring back (step drain)"},
		{"etcd.start-control-plane", "controller-1", map[string]any{"component": "etcd"}, "start etcd on controller-1 (step drain)"},
		{"etcd.start-control-plane", "controller-1", map[string]any{"component": "kube-apiserver"}, "start the API server on controller-1 (step drain)"},
		{"kube.upgrade-plan", "", map[string]any{"version": "v1.36.3", "layouts": map[string]any{}}, "plan the upgrade to v1.36.3 (step drain)"},
		{"render.set-image", "", map[string]any{"manifest": "SECRET", "container": "kube-apiserver", "tag": "v1.36.3"}, "set the image's tag of kube-apiserver (step drain)"},
		{"prometheus.alerts", "", map[string]any{"url": "http://SECRET:9090", "names": []any{"NodeDown", "EtcdDown"}}, "ask Prometheus which of 2 alerts fire (step drain)"},
	} {
		a, ok := actions.Lookup(c.action)
		if !ok {
			t.Fatalf("no action %s", c.action)
		}
		if got := activitySummary("drain", a, c.host, c.input); got != c.want {
			t.Errorf("%s: %q, want %q", c.action, got, c.want)
		}
	}
	// Every action reads like an operation, and none echoes an input
	// value that is not a name or a path (a backup destination is a name
	// the worker's inventory defines, never a path or an endpoint).
	for _, a := range actions.All() {
		in := map[string]any{}
		for _, i := range a.Inputs {
			in[i.Name] = "SECRET"
		}
		for _, name := range []string{"path", "unit", "name", "commonName", "address", "node", "kubeletVersion", "action", "image", "member", "pod", "manifest", "destination", "version", "container"} {
			delete(in, name)
		}
		got := activitySummary("s", a, "worker-1", in)
		if strings.Contains(got, "SECRET") {
			t.Errorf("%s summary shows an input: %q", a.Name, got)
		}
		if strings.HasPrefix(got, a.Name) {
			t.Errorf("%s has no summary of its own: %q", a.Name, got)
		}
	}
}

func TestCurrentDetails(t *testing.T) {
	env, _ := newEnv(t)
	var details string
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow("__temporal_workflow_metadata")
		if err != nil {
			t.Error(err)
			return
		}
		var md sdkpb.WorkflowMetadata
		if err := v.Get(&md); err != nil {
			t.Error(err)
			return
		}
		details = md.GetCurrentDetails()
		var queries []string
		for _, q := range md.GetDefinition().GetQueryDefinitions() {
			queries = append(queries, q.GetName())
		}
		if !slices.Contains(queries, ProgressQuery) {
			t.Errorf("the UI's Queries tab does not list %s: %v", ProgressQuery, queries)
		}
		var u updateResult
		env.UpdateWorkflow(ApproveUpdate, "1", &u, bind(t, env, Decision{Step: "gate", Decision: DecisionApprove, By: "alice"}))
	}, time.Minute)
	env.ExecuteWorkflow(Runbook, input(t, approvalRunbook, nil))
	if _, err := result(t, env); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**gated** on mercury: running", "- ⏸ `gate` waiting — approval \"Swap controllers too?\": `kedge approve default-test-workflow-id --step gate`", "- ○ `after` pending — host.run"} {
		if !strings.Contains(details, want) {
			t.Errorf("current details lack %q:\n%s", want, details)
		}
	}
}

func TestIsRunbookRun(t *testing.T) {
	for _, c := range []struct {
		typ, runbook string
		want         bool
	}{
		{RunbookWorkflow, "", true},
		{RunbookWorkflow, "kubelet-image-swap", true},
		{"kubelet-image-swap", "kubelet-image-swap", true},
		{RolloutWorkflow, "kubelet-image-swap", false},
		{CompensateWorkflow, "", false},
		{"chat-follow", "", false},
		{"kubelet-image-swap", "", false},
	} {
		if got := IsRunbookRun(c.typ, c.runbook); got != c.want {
			t.Errorf("IsRunbookRun(%q, %q) = %v", c.typ, c.runbook, got)
		}
	}
}
