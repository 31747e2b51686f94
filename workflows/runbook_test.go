package workflows

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/attempt"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"

	"kedge.dev/kedge/actions/host"
)

// fakeHosts stands in for the host activities: it records every call and
// answers from per-test behaviour.
type fakeHosts struct {
	mu    sync.Mutex
	calls []string // "action step-ish command/path@node"
	run   func(in host.RunInput, attempt int32) (host.RunResult, error)
}

func (f *fakeHosts) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeHosts) register(env *testsuite.TestWorkflowEnvironment) {
	attempts := map[string]int32{}
	env.RegisterActivityWithOptions(func(ctx context.Context, in host.RunInput) (host.RunResult, error) {
		// The command as the shell would run it: $NAME from the step's env.
		in.Command = os.Expand(in.Command, func(k string) string { return in.Env[k] })
		f.mu.Lock()
		key := in.Command + "@" + in.Target.Node
		attempts[key]++
		n := attempts[key]
		f.mu.Unlock()
		f.record(fmt.Sprintf("run %s@%s", in.Command, in.Target.Node))
		if f.run != nil {
			return f.run(in, n)
		}
		return host.RunResult{Stdout: in.Command, Outputs: map[string]string{"node": in.Target.Node}}, nil
	}, activity.RegisterOptions{Name: host.RunAction})
	env.RegisterActivityWithOptions(func(ctx context.Context, in host.WriteFileInput) (host.WriteFileResult, error) {
		f.record(fmt.Sprintf("write %s=%s@%s", in.Path, in.Content, in.Target.Node))
		return host.WriteFileResult{Changed: true, Backup: "/var/lib/kedge/backup/x", Existed: true}, nil
	}, activity.RegisterOptions{Name: host.WriteFileAction})
	env.RegisterActivityWithOptions(func(ctx context.Context, in host.RestoreFileInput) (host.RestoreFileResult, error) {
		f.record(fmt.Sprintf("restore %s from %s@%s", in.Path, in.Backup, in.Target.Node))
		return host.RestoreFileResult{Restored: true}, nil
	}, activity.RegisterOptions{Name: host.RestoreFileAction})
}

func (f *fakeHosts) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

const testInventory = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {identityFile: /k/id, knownHostsFile: /k/known_hosts}
controllers:
  - {name: controller-1, address: 127.0.10.1}
workers:
  - {name: worker-1, address: 127.0.10.2}
  - {name: worker-2, address: 127.0.10.3}
`

// input compiles runbook YAML (and children) the way the CLI does.
func input(t *testing.T, yaml string, params map[string]any, children ...string) RunbookInput {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name + ".yaml"
		if err := writeFile(p, body); err != nil {
			t.Fatal(err)
		}
		return p
	}
	docs, err := source.Parse("inventory.yaml", []byte(testInventory))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := inventory.Decode(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		write(childName.FindStringSubmatch(c)[1], c)
	}
	l, err := (&runbooks.Library{}).LoadFile(write("main", yaml), cluster)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := runbooks.ResolveParams(l.Runbook, params, cluster)
	if err != nil {
		t.Fatal(err)
	}
	in := RunbookInput{Runbook: *l.Runbook, Params: resolved, Cluster: *cluster, Children: map[string]runbooks.Runbook{}}
	for name, c := range l.Children {
		in.Children[name] = *c
	}
	return Admit(in, time.Now())
}

var childName = regexp.MustCompile(`name: ([a-z-]+)`)

func newEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *fakeHosts) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{
		DeadlockDetectionTimeout: DeadlockDetectionTimeout,                                // the worker's own
		Interceptors:             []interceptor.WorkerInterceptor{&attempt.Interceptor{}}, // as on every worker
	})
	Register(env)
	registerAdmit(env)
	f := &fakeHosts{}
	f.register(env)
	return env, f
}

// asOnAWorker gives env what every Kedge worker gives the workflow: its
// deadlock timeout, and the interceptor that keeps a step's failures
// while Temporal retries its action.
func asOnAWorker(env *testsuite.TestWorkflowEnvironment) {
	env.SetWorkerOptions(worker.Options{
		DeadlockDetectionTimeout: DeadlockDetectionTimeout,
		Interceptors:             []interceptor.WorkerInterceptor{&attempt.Interceptor{}},
	})
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) (RunbookResult, error) {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	err := env.GetWorkflowError()
	var res RunbookResult
	if err == nil {
		if gerr := env.GetWorkflowResult(&res); gerr != nil {
			t.Fatal(gerr)
		}
	}
	return res, err
}

func progress(t *testing.T, env *testsuite.TestWorkflowEnvironment) Progress {
	t.Helper()
	v, err := env.QueryWorkflow(ProgressQuery)
	if err != nil {
		t.Fatal(err)
	}
	var p Progress
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func stepState(p Progress, id string) StepProgress {
	for _, s := range p.Steps {
		if s.ID == id {
			return s
		}
	}
	return StepProgress{}
}

func TestParallelBranchesOutputsAndWhen(t *testing.T) {
	env, f := newEnv(t)
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: demo}
params:
  nodes: {type: nodes, default: workers}
steps:
  - id: left
    action: host.run
    on: ${ params.nodes }
    with: {command: left}
  - id: right
    action: host.run
    on: controller-1
    with: {command: right}
  - id: join
    needs: [left, right]
    action: host.run
    on: worker-1
    with:
      command: "echo $NODE $OUT"
      env: {NODE: "${ steps.right.outputs.outputs.node }", OUT: "${ steps.left.outputs['worker-2'].stdout }"}
  - id: never
    needs: [join]
    when: steps.join.outputs.exitCode != 0
    action: host.run
    on: worker-1
    with: {command: never}
`, nil))
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	calls := f.Calls()
	if !slices.Contains(calls, "run echo controller-1 left@worker-1") {
		t.Errorf("outputs did not flow into join: %v", calls)
	}
	if len(calls) != 4 {
		t.Errorf("want 4 calls (left x2, right, join), got %v", calls)
	}
	// join ran after both branches.
	if slices.Index(calls, "run echo controller-1 left@worker-1") != 3 {
		t.Errorf("join did not run last: %v", calls)
	}
	p := res.Progress
	if p.State != StateSucceeded || stepState(p, "never").State != StateSkipped || stepState(p, "left").State != StateSucceeded {
		t.Errorf("progress = %+v", p)
	}
	if hosts := stepState(p, "left").Hosts; len(hosts) != 2 || hosts[1].State != StateSucceeded {
		t.Errorf("left hosts = %+v", hosts)
	}
}

func TestRetryThenSucceed(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if attempt < 3 {
			return host.RunResult{}, temporal.NewApplicationError(fmt.Sprintf("exit 1 on attempt %d", attempt), "CommandFailed")
		}
		return host.RunResult{}, nil
	}
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: flaky}
steps:
  - id: flaky
    action: host.run
    on: worker-1
    retry: {maxAttempts: 5, initialInterval: 1s}
    with: {command: flaky}
`, nil))
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	s := stepState(res.Progress, "flaky")
	if s.Attempts != 3 || s.State != StateSucceeded || !strings.Contains(s.LastError, "exit 1 on attempt 2") {
		t.Errorf("step = %+v", s)
	}
}

// A missed heartbeat is a lost worker, not a failed step: it is retried
// even when the step allows a single attempt, and only so often.
func TestLostWorkerIsRetriedBeyondMaxAttempts(t *testing.T) {
	for _, tc := range []struct {
		lost     int32
		wantErr  bool
		attempts int
	}{{lost: 2, attempts: 3}, {lost: 10, wantErr: true, attempts: attempt.Lost + 1}} {
		env, f := newEnv(t)
		f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
			if attempt <= tc.lost {
				return host.RunResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			}
			return host.RunResult{}, nil
		}
		env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: once}
steps:
  - id: once
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with: {command: x}
`, nil))
		res, err := result(t, env)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%d lost workers: err = %v", tc.lost, err)
		}
		if n := len(f.Calls()); n != tc.attempts {
			t.Errorf("%d lost workers: %d calls, want %d", tc.lost, n, tc.attempts)
		}
		if !tc.wantErr {
			if s := stepState(res.Progress, "once"); s.Attempts != tc.attempts || s.State != StateSucceeded || !strings.Contains(s.LastError, "heartbeat") {
				t.Errorf("step = %+v", s)
			}
		}
	}
}

// A failure the step's queue did not vouch for (internal/codec refuses
// it as RefusedFailure: another site's worker answered the task) fails
// no step, even one that allows a single attempt: the step runs again.
func TestARefusedFailureIsNoFailureOfTheStep(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if attempt <= 2 {
			return host.RunResult{}, temporal.NewApplicationError("host.run's failure on task queue paris refused: not sealed", errtype.RefusedFailure)
		}
		return host.RunResult{}, nil
	}
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: once}
steps:
  - id: once
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with: {command: x}
`, nil))
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("two refused failures failed the run: %v", err)
	}
	if s := stepState(res.Progress, "once"); s.Attempts != 3 || s.State != StateSucceeded || !strings.Contains(s.LastError, "refused") {
		t.Errorf("step = %+v", s)
	}
}

func TestNonRetryableErrorStopsRetries(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		return host.RunResult{}, temporal.NewNonRetryableApplicationError("host key mismatch for worker-1", "HostKeyMismatch", nil)
	}
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: mismatch}
steps:
  - id: one
    action: host.run
    on: worker-1
    retry: {maxAttempts: 5}
    with: {command: x}
`, nil))
	_, err := result(t, env)
	if err == nil || !strings.Contains(err.Error(), "host key mismatch") {
		t.Fatalf("want failure naming the mismatch, got %v", err)
	}
	if n := len(f.Calls()); n != 1 {
		t.Errorf("non-retryable error was retried: %d calls", n)
	}
}

const sagaRunbook = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: saga}
steps:
  - id: first
    action: host.write-file
    on: worker-1
    with: {path: /etc/a, content: a}
    undo:
      action: host.restore-file
      with: {path: /etc/a, backup: "${ steps.first.outputs.backup }", existed: "${ steps.first.outputs.existed }"}
  - id: second
    needs: [first]
    action: host.write-file
    on: worker-1
    with: {path: /etc/b, content: b}
    undo:
      action: host.restore-file
      with: {path: /etc/b, backup: "${ steps.second.outputs.backup }"}
  - id: sibling
    needs: [second]
    action: host.run
    on: worker-2
    with: {command: slow}
  - id: boom
    needs: [second]
    action: host.run
    on: worker-1
    retry: {maxAttempts: 2, initialInterval: 1s}
    with: {command: boom}
  - id: after
    needs: [boom]
    action: host.run
    on: worker-1
    with: {command: after}
`

func TestFailureLetsSiblingsFinishThenUndoesInReverse(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if in.Command == "boom" {
			return host.RunResult{ExitCode: 1}, temporal.NewApplicationError("exit status 1", "CommandFailed")
		}
		time.Sleep(50 * time.Millisecond)
		return host.RunResult{}, nil
	}
	env.ExecuteWorkflow(Runbook, input(t, sagaRunbook, nil))
	_, err := result(t, env)
	if err == nil || !strings.Contains(err.Error(), "failed at step boom") {
		t.Fatalf("want failure at boom, got %v", err)
	}
	calls := f.Calls()
	want := []string{
		"restore /etc/b from /var/lib/kedge/backup/x@worker-1",
		"restore /etc/a from /var/lib/kedge/backup/x@worker-1",
	}
	if got := calls[len(calls)-2:]; !slices.Equal(got, want) {
		t.Errorf("undo order: got %v, want %v (all calls %v)", got, want, calls)
	}
	if !slices.Contains(calls, "run slow@worker-2") {
		t.Errorf("running sibling did not finish: %v", calls)
	}
	if slices.Contains(calls, "run after@worker-1") {
		t.Errorf("a step after the failure was scheduled: %v", calls)
	}
	p := progress(t, env)
	if s := stepState(p, "after"); s.State != StateNotRun {
		t.Errorf("after = %+v", s)
	}
	if s := stepState(p, "boom"); s.State != StateFailed || s.Attempts != 2 {
		t.Errorf("boom = %+v", s)
	}
	if s := stepState(p, "first"); s.Undo != StateUndone {
		t.Errorf("first undo = %+v", s)
	}
}

func TestCancellationUndoesCompletedSteps(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		return host.RunResult{}, nil
	}
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: cancel-me}
steps:
  - id: write
    action: host.write-file
    on: worker-1
    with: {path: /etc/a, content: a}
    undo:
      action: host.restore-file
      with: {path: /etc/a, backup: "${ steps.write.outputs.backup }"}
  - id: gate
    needs: [write]
    approval: {prompt: "go on?"}
`, nil))
	_, err := result(t, env)
	if !temporal.IsCanceledError(err) {
		t.Fatalf("want cancelled, got %v", err)
	}
	if calls := f.Calls(); !slices.Contains(calls, "restore /etc/a from /var/lib/kedge/backup/x@worker-1") {
		t.Errorf("undo did not run on cancel: %v", calls)
	}
	if s := stepState(progress(t, env), "gate"); s.State != StateCancelled {
		t.Errorf("gate = %+v", s)
	}
}

type updateResult struct {
	err error
	val Decision
}

func (u *updateResult) Accept()          {}
func (u *updateResult) Reject(err error) { u.err = err }
func (u *updateResult) Complete(v any, err error) {
	u.err = err
	if d, ok := v.(Decision); ok {
		u.val = d
	}
}

const approvalRunbook = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: gated}
steps:
  - id: gate
    approval: {prompt: "Swap controllers too?"}
  - id: after
    needs: [gate]
    action: host.run
    on: controller-1
    with: {command: after}
`

func TestApprovalApprove(t *testing.T) {
	env, f := newEnv(t)
	var early, bad, good updateResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(ApproveUpdate, "1", &bad, bind(t, env, Decision{Step: "after", Decision: DecisionApprove, By: "alice"}))
		env.UpdateWorkflow(ApproveUpdate, "2", &early, bind(t, env, Decision{Step: "gate", Decision: "maybe", By: "alice"}))
		env.UpdateWorkflow(ApproveUpdate, "3", &good, bind(t, env, Decision{Step: "gate", Decision: DecisionApprove, By: "alice", Comment: "ship it"}))
	}, time.Minute)
	env.ExecuteWorkflow(Runbook, input(t, approvalRunbook, nil))
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	if bad.err == nil || !strings.Contains(bad.err.Error(), "not an approval") {
		t.Errorf("decision on a non-approval step: %v", bad.err)
	}
	if early.err == nil || !strings.Contains(early.err.Error(), "decision must be") {
		t.Errorf("bad decision accepted: %v", early.err)
	}
	if good.err != nil || good.val.By != "alice" {
		t.Errorf("good decision: %+v %v", good.val, good.err)
	}
	if !slices.Contains(f.Calls(), "run after@controller-1") {
		t.Errorf("step after the gate did not run: %v", f.Calls())
	}
	if d := stepState(res.Progress, "gate").Decision; d == nil || d.By != "alice" || d.Comment != "ship it" {
		t.Errorf("decision not recorded: %+v", d)
	}
}

// An approval's prompt shows what earlier steps found: its ${ } are
// rendered as the gate opens, and the operator reads the result.
func TestApprovalPromptShowsEarlierOutputs(t *testing.T) {
	env, _ := newEnv(t)
	var shown string
	var u updateResult
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(ProgressQuery)
		if err != nil {
			t.Errorf("query: %v", err)
		} else {
			var p Progress
			if err := v.Get(&p); err != nil {
				t.Error(err)
			}
			shown = stepState(p, "gate").Prompt
		}
		env.UpdateWorkflow(ApproveUpdate, "1", &u, bind(t, env, Decision{Step: "gate", Decision: DecisionApprove, By: "alice"}))
	}, time.Minute)
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: gated}
params:
  what: {type: string, default: etcd}
steps:
  - id: look
    action: host.run
    on: controller-1
    with: {command: look}
  - id: gate
    needs: [look]
    approval: {prompt: "Restore ${ params.what } from ${ steps.look.outputs.stdout } on ${ steps.look.outputs.outputs.node }?"}
`, nil))
	if _, err := result(t, env); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	if want := "Restore etcd from look on controller-1?"; shown != want {
		t.Errorf("the gate showed %q, want %q", shown, want)
	}
}

func TestApprovalReject(t *testing.T) {
	env, f := newEnv(t)
	var u updateResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(ApproveUpdate, "1", &u, bind(t, env, Decision{Step: "gate", Decision: DecisionReject, By: "bob", Comment: "not today"}))
	}, time.Minute)
	env.ExecuteWorkflow(Runbook, input(t, approvalRunbook, nil))
	_, err := result(t, env)
	if err == nil || !strings.Contains(err.Error(), "rejected by bob: not today") {
		t.Fatalf("want rejection, got %v", err)
	}
	if len(f.Calls()) != 0 {
		t.Errorf("steps ran after a rejection: %v", f.Calls())
	}
}

func TestChildRunbook(t *testing.T) {
	env, f := newEnv(t)
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: parent}
steps:
  - id: each
    runbook: per-node
    with: {nodes: "worker-1,worker-2", greeting: hello}
`, nil, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: per-node}
params:
  nodes: {type: nodes, required: true}
  greeting: {type: string, default: hi}
steps:
  - id: greet
    action: host.run
    on: ${ params.nodes }
    with: {command: "echo $GREETING $HOST", env: {GREETING: "${ params.greeting }", HOST: "${ host.name }"}}
`))
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	calls := f.Calls()
	slices.Sort(calls)
	if !slices.Equal(calls, []string{"run echo hello worker-1@worker-1", "run echo hello worker-2@worker-2"}) {
		t.Errorf("child calls = %v", calls)
	}
	if s := stepState(res.Progress, "each"); s.State != StateSucceeded || !strings.HasSuffix(s.Child, "/each") {
		t.Errorf("each = %+v", s)
	}
}

func TestBadRenderedInputFailsWithoutRetry(t *testing.T) {
	env, f := newEnv(t)
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: bad-render}
steps:
  - id: one
    action: host.run
    on: worker-1
    with: {command: "x", acceptExitCodes: "${ [1, 'two'] }"}
`, nil))
	_, err := result(t, env)
	if err == nil || !strings.Contains(err.Error(), "input acceptExitCodes: item 2: want an integer") {
		t.Fatalf("want a failure naming the bad input, got %v", err)
	}
	if len(f.Calls()) != 0 {
		t.Errorf("activity ran with bad input: %v", f.Calls())
	}
	if s := stepState(progress(t, env), "one"); s.Attempts != 0 {
		t.Errorf("bad input was retried: %+v", s)
	}
}

// A preview runs what its gate needs and nothing else: not a step that
// needs nothing (it would run at once in a real run), not the steps after
// the gate, not even when the gate's when would skip it; it shows the
// gate's prompt rendered from what the steps before found, and ends.
func TestAPreviewRunsOnlyWhatItsGateNeeds(t *testing.T) {
	env, f := newEnv(t)
	in := input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: previewed}
params:
  ask: {type: bool, default: false}
steps:
  - id: look
    action: host.run
    on: controller-1
    with: {command: look}
  - id: aside
    action: host.run
    on: controller-1
    with: {command: change-aside}
  - id: gate
    needs: [look]
    when: params.ask
    approval: {prompt: "Change ${ steps.look.outputs.stdout } on ${ steps.look.outputs.outputs.node }?", preview: true}
  - id: change
    needs: [gate]
    action: host.run
    on: controller-1
    with: {command: change}
`, nil)
	in.Preview = true
	env.ExecuteWorkflow(Runbook, in)
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if calls := f.Calls(); !slices.Equal(calls, []string{"run look@controller-1"}) {
		t.Errorf("a preview ran %q, want only the look", calls)
	}
	p := res.Progress
	if !p.Preview || p.State != StateSucceeded {
		t.Errorf("preview %v, state %s", p.Preview, p.State)
	}
	if g := stepState(p, "gate"); g.State != StateNotRun || g.Prompt != "Change look on controller-1?" {
		t.Errorf("the gate: %s, %q", g.State, g.Prompt)
	}
	for _, id := range []string{"aside", "change"} {
		if s := stepState(p, id); s.State != StateNotRun {
			t.Errorf("step %s of a preview: %s", id, s.State)
		}
	}

	// A runbook with no preview gate: refused before its first step.
	env, f = newEnv(t)
	in = input(t, approvalRunbook, nil)
	in.Preview = true
	env.ExecuteWorkflow(Runbook, in)
	if _, err := result(t, env); err == nil || !strings.Contains(err.Error(), "has no preview gate") {
		t.Errorf("a preview of a runbook without a gate: %v", err)
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("it ran %q", calls)
	}
}

// A runbook's outputs are rendered as it ends: its parent reads a child's
// beside its state, and an output that reads a step that never ran is
// reported unavailable, the others still given.
func TestRunbookOutputsReachTheParent(t *testing.T) {
	env, f := newEnv(t)
	env.ExecuteWorkflow(Runbook, input(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: parent}
steps:
  - id: snap
    runbook: snapshot
  - id: use
    needs: [snap]
    action: host.run
    on: controller-1
    with: {command: "keep $NAME ($STATE)", env: {NAME: "${ steps.snap.outputs.name }", STATE: "${ steps.snap.outputs.state }"}}
  - id: never
    when: "false"
    action: host.run
    on: controller-1
    with: {command: never}
outputs:
  snapshot: ${ steps.snap.outputs.name }
  kept: ${ steps.use.outputs.stdout }
  missing: ${ steps.never.outputs.stdout }
`, nil, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: snapshot}
steps:
  - id: take
    action: host.run
    on: controller-1
    with: {command: snap-1}
outputs:
  name: ${ steps.take.outputs.stdout }
`))
	res, err := result(t, env)
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	if calls := f.Calls(); !slices.Contains(calls, "run keep snap-1 (succeeded)@controller-1") {
		t.Errorf("the parent did not read the child's output: %v", calls)
	}
	p := res.Progress
	if p.Outputs["snapshot"] != "snap-1" || p.Outputs["kept"] != "keep snap-1 (succeeded)" {
		t.Errorf("outputs %v", p.Outputs)
	}
	if _, ok := p.Outputs["missing"]; ok || !strings.HasPrefix(p.OutputErrors["missing"], "unavailable: ") {
		t.Errorf("the output of a step that never ran: %v, %v", p.Outputs["missing"], p.OutputErrors)
	}
}
