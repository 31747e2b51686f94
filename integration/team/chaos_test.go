package team

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"kedge.dev/kedge/workflows"
)

// Chaos: seeded, repeatable fault runs against the team install, each
// checked from the hosts and the API server (swapViolations), not from
// what Kedge reports. `make test` runs a short set; `make chaos`
// (KEDGE_CHAOS=full) the whole one. KEDGE_CHAOS_SEED picks the seed (the
// table prints it): the same seed draws the same fault points.
// KEDGE_CHAOS_ONLY=TEXT[|TEXT...] runs only the faults whose name has
// one of them.

// chaosRow is one line of the table.
type chaosRow struct {
	Fault      string
	Runs       int
	Completed  int
	Paused     int // paused at the failure budget, as designed for the fault
	Violations []string
	Slowest    time.Duration // longest rollout, start to close
}

func chaosConfig(t *testing.T) (seed uint64, full bool) {
	seed = 1
	if s := os.Getenv("KEDGE_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KEDGE_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	return seed, os.Getenv("KEDGE_CHAOS") == "full"
}

// A fault: what to break at the drawn point, and how to mend it.
type fault struct {
	name    string
	runs    int
	inject  func(t *testing.T, rng *rand.Rand, rollout string) string // returns what it broke
	mend    func(t *testing.T) error
	downFor bool // leave it broken for a drawn 1 to 5 seconds before mending
}

func TestChaos(t *testing.T) {
	logsOnFailure(t)
	seed, full := chaosConfig(t)
	rng := rand.New(rand.NewPCG(seed, 0x6b65646765))
	runs := func(short, long int) int {
		if full {
			return long
		}
		return short
	}
	var victim int
	faults := []fault{
		{name: "none (the baseline)", runs: 1,
			inject: func(t *testing.T, rng *rand.Rand, _ string) string { return "nothing" },
			mend:   func(t *testing.T) error { return nil }},
		{name: "kill -9 a worker (2 on the queue)", runs: runs(2, 20),
			inject: func(t *testing.T, rng *rand.Rand, _ string) string {
				victim = rng.IntN(len(world.team.Procs("kedge-worker")))
				world.team.Procs("kedge-worker")[victim].Kill()
				return fmt.Sprintf("worker %d", victim+1)
			},
			mend: func(t *testing.T) error { return world.team.Procs("kedge-worker")[victim].Restart() }},
		{name: "kill -9 Temporal (PostgreSQL), restart", runs: runs(1, 5), downFor: true,
			inject: func(t *testing.T, rng *rand.Rand, _ string) string {
				world.team.Procs("temporal")[0].Kill()
				return "temporal"
			},
			mend: func(t *testing.T) error {
				srv := world.team.Procs("temporal")[0]
				if err := srv.Restart(); err != nil {
					return err
				}
				return srv.WaitListening(t.Context(), "7233", 2*time.Minute)
			}},
		// With PostgreSQL killed, Temporal may deliver an activity task
		// twice (at-least-once); host.systemd's restart record keeps the
		// kubelet from being restarted twice by one step.
		{name: "kill -9 PostgreSQL, restart", runs: runs(1, 5), downFor: true,
			inject: func(t *testing.T, rng *rand.Rand, _ string) string {
				_ = world.team.Postgres().Kill()
				return "postgresql"
			},
			mend: func(t *testing.T) error { return world.team.Postgres().Start(t.Context()) }},
	}
	var mendHost func() error
	rebooted := map[int]int{} // this run's
	hostFaults := []fault{
		{name: "a node hangs (all its processes stopped), continued", runs: runs(1, 5), downFor: true,
			inject: func(t *testing.T, rng *rand.Rand, rollout string) string {
				i := swapping(rng, rollout)
				mendHost = freeze(t, world.lab.Hosts[i+1])
				return world.workers[i]
			},
			mend: func(t *testing.T) error { return mendHost() }},
		{name: "a node off the network (packets to its sshd dropped), back", runs: runs(1, 5), downFor: true,
			inject: func(t *testing.T, rng *rand.Rand, rollout string) string {
				i := swapping(rng, rollout)
				mendHost = cutOff(t, world.lab.Hosts[i+1])
				return world.workers[i]
			},
			mend: func(t *testing.T) error { return mendHost() }},
		{name: "kill -9 kube-apiserver, down 1–5 s, restarted", runs: runs(1, 5), downFor: true,
			inject: func(t *testing.T, rng *rand.Rand, _ string) string {
				if err := world.cp.KillAPIServer(); err != nil {
					t.Fatalf("kill kube-apiserver: %v", err)
				}
				return "kube-apiserver"
			},
			mend: func(t *testing.T) error { return world.cp.StartAPIServer(t.Context()) }},
		{name: "a node being swapped reboots (every process killed, units started as at boot)", runs: runs(1, 5),
			inject: func(t *testing.T, rng *rand.Rand, rollout string) string {
				i := swapping(rng, rollout)
				rebooted[i]++
				if err := reboot(t, world.lab.Hosts[i+1]); err != nil {
					t.Errorf("%v", err)
				}
				return world.workers[i]
			},
			mend: func(t *testing.T) error { return nil }},
	}
	faults = append(faults, hostFaults...)
	var rows []chaosRow
	version := 30
	only := os.Getenv("KEDGE_CHAOS_ONLY")
	for _, f := range faults {
		if f.runs == 0 || only != "" && !slices.ContainsFunc(strings.Split(only, "|"), func(s string) bool { return strings.Contains(f.name, s) }) {
			continue
		}
		row := chaosRow{Fault: f.name}
		for i := range f.runs {
			image := fmt.Sprintf("quay.io/poseidon/kubelet:v1.35.%d", version)
			version = 30 + (version-29)%10 // v1.35.30 .. v1.35.39, each run another
			marks := kubeletMarks()
			clear(rebooted)
			since := time.Now().UTC()
			started := time.Now()
			id := startRollout(t, image, 5)
			delay := time.Duration(rng.Int64N(int64(12 * time.Second)))
			var down time.Duration
			if f.downFor {
				down = time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
			}
			time.Sleep(delay)
			what := f.inject(t, rng, id)
			broke := time.Now()
			time.Sleep(down)
			if err := f.mend(t); err != nil {
				t.Fatalf("%s: could not mend %s: %v", f.name, what, err)
			}
			mended := time.Since(broke)
			err := waitClosed(t, id, 5*time.Minute)
			row.Slowest = max(row.Slowest, time.Since(started))
			t.Logf("%s, run %d: %s broken %s in, serving again %s later, rollout closed %s after the fault",
				f.name, i, what, delay.Round(time.Millisecond), mended.Round(time.Millisecond), time.Since(broke).Round(time.Millisecond))
			at := fmt.Sprintf("run %d (%s broken %s in, down %s)", i, what, delay.Round(time.Millisecond), down.Round(time.Millisecond))
			row.Runs++
			if err == nil {
				row.Completed++
			} else {
				row.Violations = append(row.Violations, fmt.Sprintf("%s: the rollout failed: %v", at, err))
			}
			vs := swapViolations(t, image, since, marks, rebooted)
			for _, v := range vs {
				row.Violations = append(row.Violations, at+": "+v)
			}
			if len(vs) > 0 {
				closeLeftOpen(t, since)
			}
		}
		rows = append(rows, row)
	}

	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "fault\truns\tcompleted\tpaused as designed\tinvariant violations\tslowest rollout\n")
	violations := 0
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\n", r.Fault, r.Runs, r.Completed, r.Paused, len(r.Violations), r.Slowest.Round(100*time.Millisecond))
		violations += len(r.Violations)
	}
	_ = w.Flush()
	mode := "short"
	if full {
		mode = "full"
	}
	fmt.Printf("\nchaos (%s set, seed %d, %d nodes, maxUnavailable 5):\n%s\n", mode, seed, nodes, b.String())
	for _, r := range rows {
		for _, v := range r.Violations {
			t.Errorf("%s: %s", r.Fault, v)
		}
	}
	if violations > 0 {
		t.Errorf("%d invariant violations (KEDGE_CHAOS_SEED=%d draws the same fault points)", violations, seed)
	}
}

// swapping draws a worker the rollout is working on (one of them, at
// random), or any worker when none is.
func swapping(rng *rand.Rand, rollout string) int {
	var running []int
	// The runbook's "workers" step is a rollout, a child workflow whose
	// steps are the nodes.
	if p, ok := progress(rollout + "/workers"); ok {
		for _, s := range p.Steps {
			if s.State != workflows.StateRunning {
				continue
			}
			for i, w := range world.workers {
				if w == s.ID {
					running = append(running, i)
				}
			}
		}
	}
	if len(running) == 0 {
		return rng.IntN(len(world.workers))
	}
	return running[rng.IntN(len(running))]
}
