package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/host"
)

const lockDrain = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: lock-drain}
params:
  node: {type: string, required: true}
  drainTimeout: {type: duration, default: 5m}
steps:
  - id: drain
    action: host.run
    on: ${ params.node }
    retry: {maxAttempts: 1}
    with: {command: "drain $T", env: {T: "${ params.drainTimeout }"}}
`

const lockRelease = `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: lock-release}
params:
  node: {type: string, required: true}
steps:
  - id: uncordon
    action: host.run
    on: ${ params.node }
    with: {command: "uncordon"}
`

// lockAnswer records an update's answer.
type lockAnswer struct {
	err error
	val FleetLockAnswer
}

func (u *lockAnswer) Accept()          {}
func (u *lockAnswer) Reject(err error) { u.err = err }
func (u *lockAnswer) Complete(v any, err error) {
	u.err = err
	if a, ok := v.(FleetLockAnswer); ok {
		u.val = a
	}
}

// The coordinator of a cluster with one slot: the first node to ask takes
// the slot and is drained, the second waits; the first is granted once
// drained, and its steady-state frees the slot for the second. A client
// ID that is not the node's is refused. A node granted and never back
// keeps its slot until a person releases it; a node whose drain failed is
// never granted.
func TestFleetLockOneSlot(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if strings.HasPrefix(in.Command, "drain") && in.Target.Node == "controller-1" {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("pdb blocks", "DrainBlocked", nil)
		}
		return host.RunResult{}, nil
	}
	drain, release := input(t, lockDrain, map[string]any{"node": "x"}), input(t, lockRelease, map[string]any{"node": "x"})
	cluster := drain.Cluster
	for i := range cluster.Controllers {
		cluster.Controllers[i].FleetLockID = "id-" + cluster.Controllers[i].Name
	}
	for i := range cluster.Workers {
		cluster.Workers[i].FleetLockID = "id-" + cluster.Workers[i].Name
	}
	in := FleetLockInput{Cluster: cluster, Drain: drain.Runbook, Release: release.Runbook, Slots: 1, IssuedAt: env.Now()}
	ask := func(at time.Duration, update, node, id string) *lockAnswer {
		a := &lockAnswer{}
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(update, at.String(), a, FleetLockRequest{Node: node, ClientID: id, Group: "default"})
		}, at)
		return a
	}
	pre, steady := FleetLockPreRebootUpdate, FleetLockSteadyStateUpdate
	w1First := ask(time.Minute, pre, "worker-1", "id-worker-1")
	w2Waits := ask(2*time.Minute, pre, "worker-2", "id-worker-2")
	w1Granted := ask(3*time.Minute, pre, "worker-1", "id-worker-1")
	forged := ask(4*time.Minute, pre, "worker-2", "id-worker-1")
	w1Back := ask(5*time.Minute, steady, "worker-1", "id-worker-1")
	w2First := ask(6*time.Minute, pre, "worker-2", "id-worker-2")
	w2Granted := ask(7*time.Minute, pre, "worker-2", "id-worker-2")
	var lost Progress
	env.RegisterDelayedCallback(func() { lost = progress(t, env) }, 40*time.Minute)
	var released, stale, copied updateResult
	env.RegisterDelayedCallback(func() {
		d := bind(t, env, Decision{Step: "worker-2", Decision: FleetLockDecisionRelease, By: "mallory"})
		d.Nonce = "lost/1"
		env.UpdateWorkflow(DecideUpdate, "stale", &stale, d)
		d = bind(t, env, Decision{Step: "worker-2", Decision: FleetLockDecisionRelease, By: "mallory"})
		d.WorkflowID = "fleetlock/another"
		env.UpdateWorkflow(DecideUpdate, "copied", &copied, d)
		env.UpdateWorkflow(DecideUpdate, "release", &released, bind(t, env, Decision{Step: "worker-2", Decision: FleetLockDecisionRelease, By: "alice"}))
	}, 41*time.Minute)
	var beforeRelease []string
	env.RegisterDelayedCallback(func() { beforeRelease = f.Calls() }, 40*time.Minute)
	c1First := ask(42*time.Minute, pre, "controller-1", "id-controller-1")
	c1Failed := ask(43*time.Minute, pre, "controller-1", "id-controller-1")
	var c1Released updateResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(DecideUpdate, "release-c1", &c1Released, bind(t, env, Decision{Step: "controller-1", Decision: FleetLockDecisionRelease, By: "alice"}))
	}, 44*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 50*time.Minute)
	env.ExecuteWorkflow(FleetLock, in)

	for _, c := range []struct {
		name    string
		a       *lockAnswer
		granted bool
		reason  string
	}{
		{"worker-1 first ask", w1First, false, "slot taken"},
		{"worker-2 while worker-1 holds the slot", w2Waits, false, "all 1 slots are held: worker-1"},
		{"worker-1 drained", w1Granted, true, "drained"},
		{"worker-1 back", w1Back, false, "waiting for Ready"},
		{"worker-2 after worker-1's release", w2First, false, "slot taken"},
		{"worker-2 drained", w2Granted, true, "drained"},
		{"controller-1 after a person released worker-2", c1First, false, "slot taken"},
		{"controller-1 whose drain failed", c1Failed, false, "its drain failed"},
	} {
		if c.a.err != nil || c.a.val.Granted != c.granted || !strings.Contains(c.a.val.Reason, c.reason) {
			t.Errorf("%s: %+v, %v; want granted=%v and %q", c.name, c.a.val, c.a.err, c.granted, c.reason)
		}
	}
	if forged.err == nil || !strings.Contains(forged.err.Error(), "not the inventory's fleetLockId") {
		t.Errorf("worker-2 with worker-1's client ID: %+v, %v", forged.val, forged.err)
	}
	if lost.State != StateWaiting || len(lost.Steps) != 1 || lost.Steps[0].ID != "worker-2" || lost.Steps[0].Action != LockLost {
		t.Errorf("worker-2 not back in 30m: %+v", lost)
	}
	if released.err != nil {
		t.Errorf("release: %v", released.err)
	}
	if stale.err == nil || !strings.Contains(stale.err.Error(), "another wait") {
		t.Errorf("a release made for another wait: %v", stale.err)
	}
	if copied.err == nil || !strings.Contains(copied.err.Error(), "not the coordinator") {
		t.Errorf("a release made for another coordinator: %v", copied.err)
	}
	calls := f.Calls()
	for _, want := range []string{"run drain 5m0s@worker-1", "run uncordon@worker-1", "run drain 5m0s@worker-2", "run drain 5m0s@controller-1"} {
		if !slices.Contains(calls, want) {
			t.Errorf("no %q in %v", want, calls)
		}
	}
	// worker-2, lost, is uncordoned (once Ready) after a person released
	// its slot, not before; controller-1, whose failed drain was undone,
	// is not touched by its release.
	if slices.Contains(beforeRelease, "run uncordon@worker-2") {
		t.Errorf("worker-2 was uncordoned without reporting back or a release: %v", beforeRelease)
	}
	if !slices.Contains(calls, "run uncordon@worker-2") {
		t.Errorf("worker-2 not uncordoned after its release: %v", calls)
	}
	if c1Released.err != nil || slices.Contains(calls, "run uncordon@controller-1") {
		t.Errorf("release of controller-1 whose drain failed: %v; calls %v", c1Released.err, calls)
	}
}

// The drain gets the coordinator's drain timeout. A lost node released by
// a person frees its slot at once, even when its Node is not Ready to be
// uncordoned (it stays cordoned), and the next node takes the slot.
func TestFleetLockDrainTimeoutAndAReleaseThatCannotUncordon(t *testing.T) {
	env, f := newEnv(t)
	f.run = func(in host.RunInput, attempt int32) (host.RunResult, error) {
		if in.Command == "uncordon" {
			return host.RunResult{}, temporal.NewNonRetryableApplicationError("node not Ready", "NotReady", nil)
		}
		return host.RunResult{}, nil
	}
	drain, release := input(t, lockDrain, map[string]any{"node": "x"}), input(t, lockRelease, map[string]any{"node": "x"})
	cluster := drain.Cluster
	for i := range cluster.Workers {
		cluster.Workers[i].FleetLockID = "id-" + cluster.Workers[i].Name
	}
	in := FleetLockInput{Cluster: cluster, Drain: drain.Runbook, Release: release.Runbook, Slots: 1, IssuedAt: env.Now(),
		DrainTimeout: 2 * time.Minute, LostAfter: time.Minute}
	ask := func(at time.Duration, node string) *lockAnswer {
		a := &lockAnswer{}
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(FleetLockPreRebootUpdate, at.String(), a, FleetLockRequest{Node: node, ClientID: "id-" + node, Group: "default"})
		}, at)
		return a
	}
	ask(time.Minute, "worker-1")
	granted := ask(2*time.Minute, "worker-1")
	var lost Progress
	var released updateResult
	env.RegisterDelayedCallback(func() {
		lost = progress(t, env)
		env.UpdateWorkflow(DecideUpdate, "release", &released, bind(t, env, Decision{Step: "worker-1", Decision: FleetLockDecisionRelease, By: "alice"}))
	}, 4*time.Minute)
	next := ask(5*time.Minute, "worker-2")
	env.RegisterDelayedCallback(env.CancelWorkflow, 10*time.Minute)
	env.ExecuteWorkflow(FleetLock, in)

	if !granted.val.Granted || len(lost.Steps) != 1 || lost.Steps[0].Action != LockLost {
		t.Fatalf("worker-1 granted %+v, then %+v", granted.val, lost)
	}
	if released.err != nil {
		t.Errorf("release: %v", released.err)
	}
	if next.err != nil || !strings.Contains(next.val.Reason, "slot taken") {
		t.Errorf("worker-2 after worker-1's release: %+v, %v", next.val, next.err)
	}
	calls := f.Calls()
	for _, want := range []string{"run drain 2m0s@worker-1", "run uncordon@worker-1", "run drain 2m0s@worker-2"} {
		if !slices.Contains(calls, want) {
			t.Errorf("no %q in %v", want, calls)
		}
	}
}
