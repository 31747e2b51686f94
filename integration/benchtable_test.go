package integration

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/crypto/ssh"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/workflows"
)

// BenchmarkTable is `make bench`: every row measured in one run, Kedge
// beside its baseline on the same hosts and the same Temporal server, at
// the same moment, so that their ratio holds whatever else the machine
// does. It prints one table:
//
//	name | kedge | baseline | ratio | target | met | baseline is
//
// The rows that move 256 MiB (an SFTP write, an etcd snapshot) are in
// benchtransfer_test.go.
func BenchmarkTable(b *testing.B) {
	var rows []benchRow
	for range b.N {
		rows = append(rows[:0], stepOverhead(b))
		rows = append(rows, fanOutRows(b, 50)...)
		rows = append(rows, fanOutRows(b, 200)...)
		rows = append(rows, workerLoss(b))
		rows = append(rows, rollout50(b)...)
		rows = append(rows, rollout1000(b)...)
		rows = append(rows, sftpWrite(b))
		rows = append(rows, etcdSnapshot(b)...)
	}
	printTable(os.Stdout, rows)
	for _, r := range rows {
		b.ReportMetric(r.kedge, r.name)
	}
}

// BenchmarkRollout50 is make bench's rollout-50 rows alone, for a change
// to what a rolling swap costs: `go test -run '^$' -bench
// '^BenchmarkRollout50$' -benchtime 1x ./integration/` with the tool
// variables make bench sets.
func BenchmarkRollout50(b *testing.B) {
	var rows []benchRow
	for range b.N {
		rows = rollout50(b)
	}
	printTable(os.Stdout, rows)
}

// benchRow is one row of the table. With a baseline, the target bounds
// kedge/baseline; without, kedge itself.
type benchRow struct {
	name            string
	kedge, baseline float64
	target          float64
	atMost          bool // the target is a ceiling (else a floor)
	note            string
}

func (r benchRow) value() float64 {
	if r.baseline > 0 {
		return r.kedge / r.baseline
	}
	return r.kedge
}

func (r benchRow) met() bool {
	if r.atMost {
		return r.value() <= r.target
	}
	return r.value() >= r.target
}

func printTable(out *os.File, rows []benchRow) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "name\tkedge\tbaseline\tratio\ttarget\tmet\tbaseline is")
	for _, r := range rows {
		base, ratio := "-", "-"
		if r.baseline > 0 {
			base, ratio = fmt.Sprintf("%.3g", r.baseline), fmt.Sprintf("%.2f", r.value())
		}
		op := ">="
		if r.atMost {
			op = "<="
		}
		what := "kedge"
		if r.baseline > 0 {
			what = "ratio"
		}
		fmt.Fprintf(w, "%s\t%.3g\t%s\t%s\t%s %s %g\t%v\t%s\n", r.name, r.kedge, base, ratio, what, op, r.target, r.met(), r.note)
	}
	_ = w.Flush()
}

// stepOverhead is a Kedge step's cost against what it cannot do without:
// one raw SSH exec over an open connection plus one empty Temporal
// activity, each measured here, per step of 50 sequential ones.
func stepOverhead(b *testing.B) benchRow {
	var sb strings.Builder
	sb.WriteString("apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: bench-seq}\nsteps:\n")
	for i := range sequentialSteps {
		fmt.Fprintf(&sb, "  - id: s%d\n    action: host.run\n    on: worker-1\n    with: {command: \"true\"}\n", i)
		if i > 0 {
			fmt.Fprintf(&sb, "    needs: [s%d]\n", i-1)
		}
	}
	in := compileFor(b, sb.String(), world.inventory)
	runDirect(b, in) // warm the pool and the task queue
	stop := profile(b, "step-overhead")
	start := time.Now()
	run := runDirect(b, in)
	kedge := msPerStep(time.Since(start))
	stop()
	steps := timeline(b, run.GetID(), run.GetRunID())

	conn := dialRaw(b, labHost(nil, "worker-1"), world.lab)
	defer conn.Close()
	start = time.Now()
	for range sequentialSteps {
		rawExec(b, conn, "sudo -n true")
	}
	exec := msPerStep(time.Since(start))
	start = time.Now()
	for range sequentialSteps {
		rawExec(b, conn, "true")
	}
	unprivileged := msPerStep(time.Since(start))
	empty, emptySteps := bareActivities(b, "empty", func(context.Context) error { return nil })
	direct := hostRunDirect(b)
	bare, bareSteps := bareActivities(b, "host-run", directRun(b))
	return benchRow{name: "step-overhead-ms", kedge: kedge, baseline: exec + empty, target: 1.3, atMost: true,
		note: fmt.Sprintf("raw SSH exec of `sudo -n true` %.2f ms (of `true` %.2f) + empty activity %.2f ms; host.run called directly %.2f ms, "+
			"in a bare SDK activity %.2f ms; per step, Kedge: %s; bare host.run: %s; empty: %s",
			exec, unprivileged, empty, direct, bare, steps, bareSteps, emptySteps)}
}

// rawExec runs cmd in a new session on conn, as a plain Go client does.
// The Kedge step runs its command as root through the lab's sudo, so the
// baseline does the same.
func rawExec(b *testing.B, conn *ssh.Client, cmd string) {
	s, err := conn.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if out, err := s.CombinedOutput(cmd); err != nil {
		b.Fatalf("%s: %v: %s", cmd, err, out)
	}
}

// timeline splits a run's sequential activities, from its history, into
// the mean time each waited to start once scheduled (queue), ran
// (activity) and took from its completion to the next one's scheduling
// (the workflow task in between).
func timeline(b *testing.B, id, runID string) string {
	var scheduled, started, completed []time.Time
	it := world.client.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled = append(scheduled, e.GetEventTime().AsTime())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started = append(started, e.GetEventTime().AsTime())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			completed = append(completed, e.GetEventTime().AsTime())
		}
	}
	n := len(completed)
	if n < 2 || len(scheduled) != n || len(started) != n {
		b.Fatalf("%s: %d activities scheduled, %d started, %d completed: not one sequence", id, len(scheduled), len(started), n)
	}
	var queue, run, decide time.Duration
	for i := range n {
		queue += started[i].Sub(scheduled[i])
		run += completed[i].Sub(started[i])
		if i+1 < n {
			decide += scheduled[i+1].Sub(completed[i])
		}
	}
	ms := func(d time.Duration, k int) string {
		return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000/float64(k))
	}
	return fmt.Sprintf("queue %s + activity %s + workflow task %s ms", ms(queue, n), ms(run, n), ms(decide, n-1))
}

// profile writes the CPU profile of what runs until stop, and the heap's
// allocations, to $KEDGE_BENCH_PROFILE/NAME.{cpu,allocs}.pprof when that
// is set (make bench sets .test/bench): the world's worker and its
// embedded Temporal server run in this process, so both are in it.
// `go tool pprof -top FILE` reads them.
func profile(b *testing.B, name string) (stop func()) {
	dir := os.Getenv("KEDGE_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, name+".cpu.pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		a, err := os.Create(filepath.Join(dir, name+".allocs.pprof"))
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		if err := pprof.Lookup("allocs").WriteTo(a, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// hostRunDirect is host.run called without Temporal, over a warm pooled
// connection, per step: what the wrapper (sudo, the watchdog, the
// outputs file) adds to the raw exec.
func hostRunDirect(b *testing.B) float64 {
	run := directRun(b)
	start := time.Now()
	for range sequentialSteps {
		if err := run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return msPerStep(time.Since(start))
}

// directRun is host.run of `true` on worker-1 through a pool of its own,
// warm.
func directRun(b *testing.B) func(context.Context) error {
	pool := sshpool.New(sshpool.Options{})
	b.Cleanup(func() { _ = pool.Close() })
	acts := &sshhost.Activities{Pool: pool}
	cluster, err := inventory.LoadFile(world.inventory)
	if err != nil {
		b.Fatal(err)
	}
	target, err := cluster.Target("worker-1")
	if err != nil {
		b.Fatal(err)
	}
	in := host.RunInput{Target: target, Command: "true"}
	run := func(ctx context.Context) error {
		_, err := acts.Run(ctx, in)
		return err
	}
	if err := run(context.Background()); err != nil {
		b.Fatal(err)
	}
	return run
}

func msPerStep(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000 / sequentialSteps
}

// bareActivities runs sequentialSteps activities of act, one after the
// other, in one workflow on the world's server with a plain SDK worker
// of its own (none of Kedge's interceptors, codec or executor), and
// returns the milliseconds each took and their timeline.
func bareActivities(b *testing.B, name string, act func(context.Context) error) (float64, string) {
	queue := "bench-" + name
	w := sdkworker.New(world.client, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, n int) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		for range n {
			if err := workflow.ExecuteActivity(ctx, "bench."+name).Get(ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}, workflow.RegisterOptions{Name: "bench." + name + "-steps"})
	w.RegisterActivityWithOptions(act, sdkactivity.RegisterOptions{Name: "bench." + name})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	run := func() (time.Duration, client.WorkflowRun) {
		ctx := context.Background()
		start := time.Now()
		r, err := world.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "bench."+name+"-steps", sequentialSteps)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Get(ctx, nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(start), r
	}
	run() // warm
	d, r := run()
	return msPerStep(d), timeline(b, r.GetID(), r.GetRunID())
}

// fanOutRows is one step (host.run of `true`) on n hosts through Kedge,
// its connection pool warm as a long-lived worker's is, against a raw Go
// fan-out that dials each host and runs the command, all at once, as a
// script would; and the same Kedge figure against `parallel-ssh -p n`.
func fanOutRows(b *testing.B, n int) []benchRow {
	fo := fanOutLab(b, n)
	in := compileFor(b, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: bench-fanout}
steps:
  - id: all
    action: host.run
    on: all
    with: {command: "true"}
`, fo.inventory)
	start := time.Now()
	runDirect(b, in) // the pool dials every host
	cold := time.Since(start).Seconds()
	stop := func() {}
	if n > 50 {
		stop = profile(b, fmt.Sprintf("fanout-%d", n))
	}
	start = time.Now()
	run := runDirect(b, in)
	kedge := time.Since(start).Seconds()
	stop()
	spread := fanOutSpread(b, run.GetID(), run.GetRunID())
	raw := rawFanOut(b, fo.lab)
	pssh := psshFanOut(b, fo.lab)
	note, psshNote := "raw Go: dial and exec on each host at once", fmt.Sprintf("parallel-ssh -p %d", n)
	if n > 50 {
		note += fmt.Sprintf("; Kedge's activities %s; Kedge's first run (its pool dialling every host) %.2f s; "+
			"the lab started in %.1f s, its %d hosts hold %.0f MiB (Pss of sshd and unshare)", spread, cold, fo.started.Seconds(), n, fo.mib)
	}
	return []benchRow{
		{name: fmt.Sprintf("fanout-%d-s", n), kedge: kedge, baseline: raw, target: 1.5, atMost: true, note: note},
		{name: fmt.Sprintf("fanout-%d-pssh-s", n), kedge: kedge, baseline: pssh, target: 0.3, atMost: true, note: psshNote},
	}
}

// rawFanOut dials every host of l and runs `true` on each, all at once,
// and returns the seconds it took.
func rawFanOut(b *testing.B, l *testhosts.Lab) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(l.Hosts))
	cfg := rawConfig(b, l)
	for _, h := range l.Hosts {
		wg.Go(func() {
			c, err := ssh.Dial("tcp", fmt.Sprintf("%s:%d", h.Address, h.Port), cfg)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			s, err := c.NewSession()
			if err == nil {
				err = s.Run("true")
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start).Seconds()
}

// psshFanOut runs `true` on every host of l with `parallel-ssh -p N`
// (N the lab's size: all at once) and returns the seconds it took.
func psshFanOut(b *testing.B, l *testhosts.Lab) float64 {
	hosts := b.TempDir() + "/hosts"
	var lines []string
	for _, h := range l.Hosts {
		lines = append(lines, fmt.Sprintf("%s@%s:%d", l.User, h.Address, h.Port))
	}
	if err := os.WriteFile(hosts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command("parallel-ssh", "-h", hosts, "-p", fmt.Sprint(len(l.Hosts)), "-t", "60",
		"-O", "IdentityFile="+l.IdentityFile,
		"-O", "UserKnownHostsFile="+l.KnownHostsFile,
		"-O", "StrictHostKeyChecking=yes", "-O", "BatchMode=yes", "true")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("parallel-ssh: %v\n%s", err, out)
	}
	return time.Since(start).Seconds()
}

// fanOutSpread says, from a fan-out run's history, when its activities
// were scheduled, started and completed, from the first scheduling: how
// long the last waited for a worker slot, and the last ran.
func fanOutSpread(b *testing.B, id, runID string) string {
	var first, lastScheduled, lastStarted, lastCompleted time.Time
	it := world.client.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if first.IsZero() {
				first = at
			}
			lastScheduled = at
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			lastStarted = later(lastStarted, at)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			lastCompleted = later(lastCompleted, at)
		}
	}
	ms := func(t time.Time) string { return fmt.Sprintf("%.0f", float64(t.Sub(first).Microseconds())/1000) }
	return fmt.Sprintf("all scheduled by %s ms, started by %s ms, completed by %s ms", ms(lastScheduled), ms(lastStarted), ms(lastCompleted))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// workerLoss is how long a rollout stands still when the worker running
// its step is killed: from the kill until the step's next attempt starts
// on the surviving worker (Temporal's retry once the lost attempt's
// heartbeat is missed). Two `kedge worker` processes serve a queue of
// their own; the step sleeps, so the kill lands inside it.
func workerLoss(b *testing.B) benchRow {
	const queue = "bench-loss"
	workers := map[string]*exec.Cmd{}
	for _, name := range []string{"bench-loss-a", "bench-loss-b"} {
		workers[name] = startWorkerEnv(b, queue, []string{"KEDGE_WORKER_IDENTITY=" + name})
	}
	in := compileFor(b, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: bench-loss}
steps:
  - id: first
    action: host.run
    on: worker-1
    with: {command: "true"}
  - id: long
    needs: [first]
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with: {command: "sleep 20"}
`, world.inventory)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := world.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflows.RunbookWorkflow, workflows.Admit(in, time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	// The long step's first attempt running on one of the two.
	var held string
	for held == "" {
		held = runningOn(ctx, b, run.GetID(), "long", 1)
	}
	killed := time.Now()
	w := workers[held]
	_ = w.Process.Kill()
	_ = w.Wait()
	var survivor string
	for survivor == "" {
		survivor = runningOn(ctx, b, run.GetID(), "long", 2)
	}
	resumed := time.Since(killed).Seconds()
	if survivor == held {
		b.Fatalf("the second attempt ran on %s, the worker killed", held)
	}
	if err := run.Get(ctx, nil); err != nil {
		b.Fatalf("the run after the kill: %v", err)
	}
	return benchRow{name: "worker-loss-resume-s", kedge: resumed, target: 10, atMost: true,
		note: "kill -9 of the worker running a step, to its next attempt started on the other"}
}

// runningOn returns the worker running attempt n of step's activity in
// run id, "" while there is none yet (it waits a moment first).
func runningOn(ctx context.Context, b *testing.B, id, step string, n int32) string {
	select {
	case <-ctx.Done():
		b.Fatalf("%s's attempt %d never started", step, n)
	case <-time.After(50 * time.Millisecond):
	}
	d, err := world.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range d.GetPendingActivities() {
		s, _, _, ok := attempt.ParseID(a.GetActivityId())
		if ok && s == step && a.GetAttempt() == n && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return a.GetLastWorkerIdentity()
		}
	}
	return ""
}

// swapVersion numbers the images the swaps of one benchmark run put on,
// each a change (the lab's hosts have v1.35.0 to v1.35.49:
// testhosts.LabImages).
var swapVersion = 10

// rollout50 is a rolling kubelet swap over 50 simulated nodes with
// maxUnavailable 10: how full it kept its window (the node runbooks'
// busy time over 10 slots for the rollout's wall time), and its time
// against the ideal, ⌈50/10⌉ batches of one node's swap measured alone
// just before (the best of three).
func rollout50(b *testing.B) []benchRow {
	inv, workers := fiftyNodes(b)
	image := func() string { swapVersion++; return fmt.Sprintf("quay.io/poseidon/kubelet:v1.35.%d", swapVersion) }
	// One node alone varies with whatever else the machine does (0.35 to
	// 1.4 s over runs): the best of three nodes, as a baseline is taken.
	single := time.Duration(math.MaxInt64)
	for _, w := range workers[:3] {
		took, _ := runTimed(b, compile(b, "kubelet-image-swap-node", inv, map[string]any{"node": w, "image": image()}))
		single = min(single, took)
	}
	stop := profile(b, "rollout-50")
	cpu := sampleCPU()
	rolling, _ := runTimed(b, compile(b, "kubelet-image-swap", inv, map[string]any{
		"image": image(), "nodes": "workers", "maxUnavailable": swapWindow, "approveControllers": false}))
	where := cpuSince(cpu)
	stop()
	var busy time.Duration
	for _, w := range workers {
		d, err := world.client.DescribeWorkflowExecution(context.Background(), workflows.NodeWorkflowID("fifty", w), "")
		if err != nil {
			b.Fatal(err)
		}
		info := d.GetWorkflowExecutionInfo()
		busy += info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime())
	}
	ideal := time.Duration(math.Ceil(float64(swapNodes)/swapWindow)) * single
	return []benchRow{
		{name: "rollout-50-occupancy", kedge: busy.Seconds() / (swapWindow * rolling.Seconds()), target: 0.9,
			note: fmt.Sprintf("node runbooks busy %.1f s in 10 slots of %.1f s", busy.Seconds(), rolling.Seconds())},
		{name: "rollout-50-vs-ideal", kedge: rolling.Seconds(), baseline: ideal.Seconds(), target: 1.5, atMost: true,
			note: fmt.Sprintf("ideal: 5 batches of one node alone (%.2f s, best of 3); %s", single.Seconds(), where)},
	}
}

// rollout1000 is a rollout over 1,000 nodes of a trivial node runbook on
// a `kedge worker` process of its own: its largest history (the runbook,
// the rollout's runs, the node runbooks), the worker's peak resident
// memory, and how long replaying that history takes (what a worker does
// when it takes the run over).
func rollout1000(b *testing.B) []benchRow {
	const queue = "bench-1000"
	inv, in := thousandNodes(b)
	w := startWorker(b, queue, inv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	run, err := world.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, workflows.RunbookWorkflow, workflows.Admit(in, time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		b.Fatalf("the 1,000-node rollout: %v", err)
	}
	rss := peakRSSMiB(b, w.Process.Pid)
	h := largestHistory(b, run.GetID(), thousand)
	var events []*historypb.HistoryEvent
	it := world.client.GetWorkflowHistory(ctx, h.id, h.runID, false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, e)
	}
	var co client.Options // the history is sealed: replay opens it as a worker would
	world.codec.ReplayedIn(world.srv.Namespace()).Apply(&co)
	r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{DataConverter: co.DataConverter, FailureConverter: co.FailureConverter})
	if err != nil {
		b.Fatal(err)
	}
	workflows.Register(r)
	var opts sdkworker.ReplayWorkflowHistoryOptions
	opts.OriginalExecution = workflow.Execution{ID: h.id, RunID: h.runID}
	start := time.Now()
	if err := r.ReplayWorkflowHistoryWithOptions(nil, &historypb.History{Events: events}, opts); err != nil {
		b.Fatalf("replay %s: %v", h.where(), err)
	}
	replay := time.Since(start)
	return []benchRow{
		{name: "rollout-1000-largest-history-events", kedge: float64(h.events), target: 10240, atMost: true, note: h.where()},
		{name: "rollout-1000-worker-rss-mib", kedge: rss, target: 512, atMost: true, note: "peak (VmHWM) of the kedge worker that ran it"},
		{name: "replay-largest-ms", kedge: float64(replay.Microseconds()) / 1000, target: 1000, atMost: true, note: fmt.Sprintf("%d events", len(events))},
	}
}

// peakRSSMiB reads a process's peak resident memory.
func peakRSSMiB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmHWM for process %d", pid)
	return 0
}
