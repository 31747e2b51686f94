package workflows

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// rowText is a row in one line: depth, path, kind, state, mark, what,
// parts, bar, and the flags and texts that are set.
func rowText(r Row) string {
	s := fmt.Sprintf("%d %s %s %s %s %q %d/%d", r.Depth, r.Path, r.Kind, r.State, r.Mark, r.What, r.Done, r.Total)
	for _, f := range []struct{ name, v string }{
		{"parts", r.PartsText}, {"err", r.Error}, {"decided", r.Decided}, {"undo", r.Undo},
		{"elapsed", r.Elapsed}, {"active", strings.Join(r.Active, ",")},
	} {
		if f.v != "" {
			s += fmt.Sprintf(" %s=%q", f.name, f.v)
		}
	}
	if r.Attempts > 1 {
		s += fmt.Sprintf(" attempt=%d", r.Attempts)
	}
	if r.WaitingForApproval {
		s += " approval"
	}
	if r.Paused {
		s += " paused"
	}
	return s
}

func TestView(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	for _, c := range []struct {
		name    string
		p       Progress
		o       ViewOptions
		summary string
		rows    []string
	}{{
		name: "a runbook with a child",
		p: Progress{State: StateRunning, Steps: []StepProgress{
			{ID: "check", Kind: "action", Action: "kedge.check", State: StateSucceeded, Attempts: 1, StartedAt: at(0), EndedAt: at(3 * time.Second)},
			{ID: "upgrade", Kind: "runbook", State: StateRunning, Attempts: 1, Child: "up/c/x/upgrade", StartedAt: at(3 * time.Second)},
		}},
		o: ViewOptions{Now: t0.Add(time.Minute), Runbooks: map[string]string{"upgrade": "node-upgrade"}, Children: map[string]Progress{
			"up/c/x/upgrade": {State: StateRunning, Steps: []StepProgress{
				{ID: "drain", Kind: "action", Action: "kube.drain", State: StateRunning, Attempts: 2, LastError: "evicting pod"},
				{ID: "uncordon", Kind: "action", Action: "kube.uncordon", State: StatePending},
			}},
		}},
		summary: "running: 2 steps: 1 succeeded, 1 running",
		rows: []string{
			`0 check action succeeded ✓ "kedge.check" 1/1 elapsed="3s"`,
			`0 upgrade runbook running ▶ "runbook node-upgrade" 0/1 elapsed="57s"`,
			`1 upgrade/drain action running ▶ "kube.drain" 0/1 err="evicting pod" attempt=2`,
			`1 upgrade/uncordon action pending ○ "kube.uncordon" 0/1`,
		},
	}, {
		name: "a rollout with items, one item's runbook known",
		p: Progress{State: StateRunning, Steps: []StepProgress{
			{ID: "workers", Kind: "rollout", State: StateRunning, Child: "s/c/x/workers", Items: []StepProgress{
				{ID: "w1", Kind: "runbook", State: StateSucceeded, Child: "c/node/w1", Attempts: 1},
				{ID: "w2", Kind: "runbook", State: StateRunning, Child: "c/node/w2", Attempts: 1},
				{ID: "w3", Kind: "runbook", State: StateFailed, Child: "c/node/w3", Attempts: 1, LastError: "drain timed out"},
				{ID: "w4", Kind: "runbook", State: StateUndone, Child: "c/node/w4", Attempts: 1},
				{ID: "w5", Kind: "runbook", State: StatePending},
			}},
		}},
		o: ViewOptions{Children: map[string]Progress{"c/node/w2": {Steps: []StepProgress{
			{ID: "cordon", State: StateSucceeded}, {ID: "drain", State: StateRunning}, {ID: "uncordon", State: StatePending},
		}}}},
		summary: "running: 1 step: 1 running",
		rows: []string{
			`0 workers rollout running ▶ "rollout s/c/x/workers" 3/5 parts="5 items: 1 succeeded, 1 undone, 1 running, 1 failed, 1 pending"`,
			`1 workers/w1 item succeeded ✓ "runbook c/node/w1" 1/1`,
			`1 workers/w2 item running ▶ "runbook c/node/w2" 1/3 parts="3 steps: 1 succeeded, 1 running, 1 pending" active="drain"`,
			`2 workers/w2/cordon  succeeded ✓ "" 1/1`,
			`2 workers/w2/drain  running ▶ "" 0/1`,
			`2 workers/w2/uncordon  pending ○ "" 0/1`,
			`1 workers/w3 item failed ✗ "runbook c/node/w3" 1/1 err="drain timed out"`,
			`1 workers/w4 item undone ↩ "runbook c/node/w4" 1/1`,
			`1 workers/w5 item pending ○ "" 0/1`,
		},
	}, {
		name: "a failed host with an error; an error retried away is not shown, one cancelled is",
		p: Progress{State: StateFailed, Error: "step pull failed", Steps: []StepProgress{
			{ID: "prep", Kind: "action", Action: "host.run", State: StateSucceeded, Attempts: 3, LastError: "exit 1 on attempt 2",
				Hosts: []HostProgress{{Name: "h1", State: StateSucceeded, Attempts: 3, LastError: "exit 1 on attempt 2"}}},
			{ID: "pull", Kind: "action", Action: "host.pull-image", State: StateFailed, Attempts: 1, LastError: "h2: no such image", Undo: StateUndone,
				Hosts: []HostProgress{
					{Name: "h1", State: StateSucceeded, Attempts: 1},
					{Name: "h2", State: StateFailed, Attempts: 3, LastError: "no such image"},
					{Name: "h3", State: StateCancelled, Attempts: 1},
				}},
			{ID: "cleanup", Kind: "action", Action: "host.run", State: StateCancelled, Attempts: 2, LastError: "connection refused"},
			{ID: "after", Kind: "action", Action: "host.run", State: StateNotRun},
		}},
		summary: "failed: 4 steps: 1 succeeded, 1 failed, 1 cancelled, 1 not-run",
		rows: []string{
			`0 prep action succeeded ✓ "host.run" 1/1 parts="h1" attempt=3`,
			`1 prep/h1 host succeeded ✓ "host.run" 1/1 attempt=3`,
			`0 pull action failed ✗ "host.pull-image" 3/3 parts="3 hosts: 1 succeeded, 1 failed, 1 cancelled" err="h2: no such image" undo="undone"`,
			`1 pull/h1 host succeeded ✓ "host.pull-image" 1/1`,
			`1 pull/h2 host failed ✗ "host.pull-image" 1/1 err="no such image" attempt=3`,
			`1 pull/h3 host cancelled ↩ "host.pull-image" 1/1`,
			`0 cleanup action cancelled ↩ "host.run" 1/1 err="connection refused" attempt=2`,
			`0 after action not-run – "host.run" 1/1`,
		},
	}, {
		name: "a pause: an approval waiting, a rollout paused, an approval decided",
		p: Progress{State: StateRunning, Steps: []StepProgress{
			{ID: "first", Kind: "approval", State: StateSucceeded, Prompt: "Begin?", Decision: &Decision{Step: "first", Decision: DecisionApprove, By: "alice"}},
			{ID: "nodes", Kind: "rollout", State: StateRunning, Child: "s/c/x/nodes", Paused: true, Items: []StepProgress{
				{ID: "n1", Kind: "runbook", State: StateFailed, Child: "c/node/n1", LastError: "boom"},
			}},
			{ID: "gate", Kind: "approval", State: StateWaiting, Prompt: "Swap controllers too?"},
		}},
		summary: "running: 3 steps: 1 succeeded, 1 running, 1 waiting; 2 waiting for a decision",
		rows: []string{
			`0 first approval succeeded ✓ "approval \"Begin?\"" 1/1 decided="approved by alice"`,
			`0 nodes rollout running ▶ "rollout s/c/x/nodes" 1/1 parts="1 item: 1 failed" paused`,
			`1 nodes/n1 item failed ✗ "runbook c/node/n1" 1/1 err="boom"`,
			`0 gate approval waiting ⏸ "approval \"Swap controllers too?\"" 0/1 approval`,
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			v := NewView(c.p, c.o)
			if v.Summary != c.summary {
				t.Errorf("summary %q, want %q", v.Summary, c.summary)
			}
			var got []string
			for _, r := range v.Rows {
				got = append(got, rowText(r))
			}
			if g, w := strings.Join(got, "\n"), strings.Join(c.rows, "\n"); g != w {
				t.Errorf("rows:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

// Counts are told in one order whatever the order of the states, add up
// to the whole, and keep a state they do not know.
func TestCountStates(t *testing.T) {
	c := CountStates([]string{StatePending, "weird", StateFailed, StateSucceeded, StatePending, StateCancelled})
	if got := c.String(); got != "1 succeeded, 1 failed, 1 cancelled, 2 pending, 1 weird" {
		t.Errorf("counts %q", got)
	}
	if c.Total() != 6 || c.Ended() != 4 || c.Of(StatePending) != 2 {
		t.Errorf("total %d, ended %d, pending %d", c.Total(), c.Ended(), c.Of(StatePending))
	}
}
