package starter

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/activities/guard"
	"kedge.dev/kedge/runbooks/plan"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"

	"kedge.dev/kedge/actions/check"
)

const labInventory = "testdata/lab-inventory.yaml"

// outputs answers a fake's call: the zero value of the action's result
// (every field present, as JSON has it) with the case's answers over it.
type outputs func(action string, in map[string]any) map[string]any

// The plan is what runs: each built-in runbook runs in the SDK's test
// environment against recording fakes of every action, and the calls it
// makes (action, run, task queue, input) are exactly the calls
// `kedge plan --output json` prints for it, but for the inputs and hosts
// the plan marks as known only at run time.
func TestPlanIsWhatRuns(t *testing.T) {
	for _, tc := range planCases() {
		t.Run(tc.runbook, func(t *testing.T) {
			args := append([]string{"plan", tc.runbook, "--inventory", labInventory, "--output", "json"}, setArgs(tc.sets)...)
			out, errOut, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("kedge plan: exit %d: %s", code, errOut)
			}
			var p plan.Plan
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("plan JSON: %v\n%s", err, out)
			}
			ran, ownQueue, secrets := runRecorded(t, tc.runbook, tc.sets, tc.outputs)
			for _, r := range ran {
				if err := onlyReferences(r.Input); err != nil {
					t.Errorf("%s in %s: %v", r.Action, r.Workflow, err)
				}
			}
			ids := plan.RunIDs{Root: "default-test-workflow-id", Child: workflows.ChildWorkflowID, Item: workflows.NodeWorkflowID}
			v := plan.Verify(&p, ran, ids, ownQueue, secrets)
			for _, problem := range v.Problems {
				t.Error(problem)
			}
			if v.Compared == 0 {
				t.Error("no call compared")
			}
			t.Logf("%d calls ran, %d compared with the plan (%d inputs of them known only at run time)", len(ran), v.Compared, v.Deferred)
		})
	}
}

// refKeys are the keys a run may send of each target: which cluster,
// which host. Addresses, users, keys, token files and kubeconfigs are the
// worker's to fill in.
var refKeys = map[string][]string{
	"target":  {"cluster", "node"},
	"vault":   {"cluster"},
	"cluster": {"name"},
}

// onlyReferences says what an action's input carries of its targets
// beyond the references.
func onlyReferences(input map[string]any) error {
	for field, allowed := range refKeys {
		m, ok := input[field].(map[string]any)
		if !ok {
			continue
		}
		for k := range m {
			if !slices.Contains(allowed, k) {
				return fmt.Errorf("its %s carries %s=%v: a run sends references only (%s)", field, k, m[k], strings.Join(allowed, ", "))
			}
		}
	}
	return nil
}

func setArgs(sets map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		out = append(out, "--set", k+"="+sets[k])
	}
	return out
}

// runRecorded runs a runbook as `kedge run` would start it, every action
// answered by a recording fake. It returns the calls and the runbook's own
// task queue, and the values of its secret params.
func runRecorded(t *testing.T, name string, sets map[string]string, answer outputs) (ran []plan.Ran, ownQueue string, secrets []string) {
	t.Helper()
	ran, ownQueue, secrets, err := runRecordedOn(t, labInventory, name, sets, answer)
	if err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	return ran, ownQueue, secrets
}

// runRecordedOn runs the built-in runbook name on the inventory at inv
// against recording fakes, and returns what it called and how it ended.
func runRecordedOn(t *testing.T, inv, name string, sets map[string]string, answer outputs) (ran []plan.Ran, ownQueue string, secrets []string, runErr error) {
	t.Helper()
	given := map[string]any{}
	for k, v := range sets {
		given[k] = v
	}
	// Prepared as every front door prepares a start; internal runbooks
	// too, as the CLI may.
	p, err := runs.Prepare(inv, name, given, runs.Policy{Internal: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range p.Loaded.Runbook.SecretParams() {
		if v, ok := p.Plan.StartParams()[name].(string); ok && v != "" {
			secrets = append(secrets, v)
		}
	}
	in := workflows.Admit(p.Input(), time.Now())

	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	// A workflow task of a big runbook took over the SDK's default second
	// once on a machine busy with a cold build; this test is about what
	// the run calls, not about how fast the first task is.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 30 * time.Second})
	workflows.Register(env)
	var mu sync.Mutex
	env.RegisterActivityWithOptions(func(ctx context.Context, in workflows.AdmitRunInput) (workflows.AdmitRunResult, error) {
		mu.Lock()
		ownQueue = activity.GetInfo(ctx).TaskQueue
		mu.Unlock()
		return workflows.AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID, Admitted: true}, nil
	}, activity.RegisterOptions{Name: workflows.AdmitRunActivity})
	for _, a := range actions.All() {
		zero := zeroResult(t, a.Out)
		env.RegisterActivityWithOptions(func(ctx context.Context, in map[string]any) (map[string]any, error) {
			info := activity.GetInfo(ctx)
			mu.Lock()
			ran = append(ran, plan.Ran{Workflow: info.WorkflowExecution.ID, Action: a.Name, TaskQueue: info.TaskQueue, Input: in})
			mu.Unlock()
			if a.Name == check.Action { // the real guard: a false condition stops the run
				that, _ := in["that"].(bool)
				message, _ := in["message"].(string)
				if _, err := guard.Check(ctx, check.Input{That: that, Message: message}); err != nil {
					return nil, err
				}
			}
			out := cloneJSON(t, zero)
			for _, answer := range []outputs{labAnswers, answer} {
				if answer == nil {
					continue
				}
				for k, v := range answer(a.Name, in) {
					out[k] = v
				}
			}
			return out, nil
		}, activity.RegisterOptions{Name: a.Name})
	}
	env.SetOnChildWorkflowCompletedListener(func(info *workflow.Info, _ converter.EncodedValue, err error) {
		if err != nil {
			t.Errorf("run %s failed: %v", info.WorkflowExecution.ID, err)
		}
	})
	env.ExecuteWorkflow(workflows.RunbookWorkflow, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the run did not complete")
	}
	return ran, ownQueue, secrets, env.GetWorkflowError()
}

func zeroResult(t *testing.T, typ reflect.Type) map[string]any {
	t.Helper()
	m, ok := zeroJSON(typ, 0).(map[string]any)
	if !ok {
		t.Fatalf("result type %s is not a struct", typ)
	}
	return m
}

// zeroJSON is the zero value of typ as JSON decodes it, every field
// present (omitempty or not) and every pointer followed.
func zeroJSON(typ reflect.Type, depth int) any {
	if depth > 8 {
		return nil
	}
	switch typ.Kind() {
	case reflect.Pointer:
		return zeroJSON(typ.Elem(), depth+1)
	case reflect.Struct:
		if typ == reflect.TypeFor[time.Time]() {
			return time.Time{}.Format(time.RFC3339)
		}
		out := map[string]any{}
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				for k, v := range zeroJSON(f.Type, depth+1).(map[string]any) {
					out[k] = v
				}
				continue
			}
			out[cmp.Or(name, f.Name)] = zeroJSON(f.Type, depth+1)
		}
		return out
	case reflect.Map:
		return map[string]any{}
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() == reflect.Uint8 {
			return ""
		}
		return []any{}
	case reflect.String:
		return ""
	case reflect.Bool:
		return false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return float64(0)
	}
	return nil
}

func cloneJSON(t *testing.T, m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		t.Error(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Error(err)
	}
	return out
}

// labAnswers are what the lab's hosts answer where a zero value would
// stop a runbook before its end: the files a layout finds.
func labAnswers(action string, _ map[string]any) map[string]any {
	switch action {
	case "host.layout":
		return map[string]any{"files": map[string]any{
			"cluster-ca":          "/etc/kubernetes/pki/ca.crt",
			"etcd-server-ca":      "/etc/ssl/etcd/etcd/server-ca.crt",
			"service-account-pub": "/etc/kubernetes/pki/service-account.pub",
		}}
	}
	return nil
}

type planCase struct {
	runbook string
	sets    map[string]string
	outputs outputs
}

func planCases() []planCase {
	const (
		image = "quay.io/poseidon/kubelet:v1.35.5"
		ca    = "-----BEGIN CERTIFICATE-----\nMIIBcluster\n-----END CERTIFICATE-----"
		etcd  = "-----BEGIN CERTIFICATE-----\nMIIBetcd\n-----END CERTIFICATE-----"
		key   = "-----BEGIN PRIVATE KEY-----\nMIIBkey\n-----END PRIVATE KEY-----"
		pub   = "-----BEGIN PUBLIC KEY-----\nMIIBpub\n-----END PUBLIC KEY-----"
	)
	controller := map[string]string{"node": "lab-1", "issuer": "cluster-ca", "caCert": ca, "etcdIssuer": "etcd-ca", "etcdCACert": etcd}
	with := func(base map[string]string, more ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(more); i += 2 {
			out[more[i]] = more[i+1]
		}
		return out
	}
	return []planCase{
		{runbook: "run-command", sets: map[string]string{"command": "uptime", "nodes": "all"}},
		{runbook: "kubelet-image-swap", sets: map[string]string{"image": image, "approveControllers": "false"}},
		{runbook: "kubelet-image-swap-node", sets: map[string]string{"node": "lab-3", "image": image}},
		{runbook: "node-remove", sets: map[string]string{"node": "lab-3"}},
		{runbook: "node-join", sets: map[string]string{"node": "lab-3", "image": image}},
		{runbook: "cert-renewal", sets: map[string]string{"threshold": "43800h"}},
		{runbook: "cert-renewal-kubelet", sets: map[string]string{"node": "lab-3", "issuer": "cluster-ca"}},
		{runbook: "cert-renewal-in-place", sets: controller},
		{runbook: "cert-renewal-controller", sets: with(controller, "caKey", key, "saKey", key, "saPub", pub)},
		{runbook: "bootstrap-controller", sets: with(controller, "image", image, "caKey", key, "saKey", key, "saPub", pub)},
		{runbook: "bootstrap", sets: map[string]string{"image": image}},
		{runbook: "adopt", sets: map[string]string{"etcdCAKey": key}},
		{runbook: "adopt-check", sets: map[string]string{"node": "lab-1", "caCert": ca, "etcdCACert": etcd}},
	}
}
