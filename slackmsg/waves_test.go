package slackmsg

import (
	"strings"
	"testing"

	"kedge.dev/kedge/workflows"
)

// osUpdate is an os-update run's progress as the follower sees it: step
// first done, the approval decided, workers part way.
func osUpdate(workers workflows.StepProgress) workflows.Progress {
	return workflows.Progress{WorkflowID: "os-update/osup/x", Runbook: "os-update", Cluster: "osup", State: workflows.StateRunning,
		Steps: []workflows.StepProgress{
			{ID: "first", Kind: "rollout", State: workflows.StateSucceeded, Child: "first-ro",
				Items: []workflows.StepProgress{{ID: "w1", State: workflows.StateSucceeded, Child: "node/w1"}}},
			{ID: "approve-workers", Kind: "approval", State: workflows.StateSucceeded},
			workers,
			{ID: "approve-controllers", Kind: "approval", State: workflows.StatePending},
			{ID: "controllers", Kind: "rollout", State: workflows.StatePending},
		}}
}

func workersAt(waiting string, states ...string) workflows.StepProgress {
	s := workflows.StepProgress{ID: "workers", Kind: "rollout", State: workflows.StateRunning, Waiting: waiting}
	for i, st := range states {
		id := "w" + string(rune('2'+i))
		s.Items = append(s.Items, workflows.StepProgress{ID: id, State: st, Child: "node/" + id})
	}
	return s
}

// A rollout-shaped run is told wave by wave: the one-node wave with what
// its node booted, the bigger wave counted with the nodes under way and
// their step, and what it waits for.
func TestWaveLines(t *testing.T) {
	items := map[string]workflows.Progress{
		"node/w1": {Outputs: map[string]any{"rebooted": true, "booted": "6.1.0-21-amd64"}},
		"node/w4": {Steps: []workflows.StepProgress{{ID: "stage", State: workflows.StateSucceeded}, {ID: "drain", State: workflows.StateRunning}}},
	}
	p := osUpdate(workersAt("", workflows.StateSucceeded, workflows.StateSucceeded, workflows.StateRunning))
	got := strings.Join(WaveLines(p, items), "\n")
	want := ":white_check_mark: `first`: w1 done (rebooted into 6.1.0-21-amd64)\n" +
		":arrows_counterclockwise: `workers`: 2/3 done, w4 at `drain`"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	p = osUpdate(workersAt("waiting for the next window: Sat 02:00 UTC", workflows.StateSucceeded, workflows.StateFailed, workflows.StatePending))
	p.Steps[2].Items[1].LastError = "drain: pdb blocks"
	if got := WaveLines(p, nil)[1]; got != ":arrows_counterclockwise: `workers`: 1/3 done, 1 failed; waiting for the next window: Sat 02:00 UTC" {
		t.Errorf("a wave waiting for its window: %s", got)
	}

	p.Steps[1].State = workflows.StateWaiting
	if got := WaveLines(p, map[string]workflows.Progress{"node/w1": {Outputs: map[string]any{"rebooted": false, "booted": "6.1.0-20"}}}); len(got) != 3 ||
		got[0] != ":white_check_mark: `first`: w1 done (nothing to update: 6.1.0-20)" || !strings.Contains(got[1], "`approve-workers`: waiting for approval") {
		t.Errorf("the first node up to date, its approval waiting: %q", got)
	}
	m := WaveMessage(workflows.ChatFollowInput{WorkflowID: "os-update/osup/x", Runbook: "os-update", Cluster: "osup", Link: "https://ui/x"}, p, nil)
	if !strings.HasPrefix(m.Text, ":arrows_counterclockwise: *os-update* on *osup*:\n") || !strings.HasSuffix(m.Text, "\n<https://ui/x|os-update/osup/x>") {
		t.Errorf("message %q", m.Text)
	}
}

// The key changes at a wave's transitions only: not when a node starts or
// moves on to its next step, nor with the delay between nodes.
func TestWaveKey(t *testing.T) {
	start := WaveKey(osUpdate(workersAt("", workflows.StatePending, workflows.StatePending)))
	same := []workflows.Progress{
		osUpdate(workersAt("", workflows.StateRunning, workflows.StatePending)),
		osUpdate(workersAt("waiting 30s between items: the next starts at 02:01:00 UTC", workflows.StateRunning, workflows.StatePending)),
	}
	for _, p := range same {
		if k := WaveKey(p); k != start {
			t.Errorf("key %q, want %q", k, start)
		}
	}
	for _, p := range []workflows.Progress{
		osUpdate(workersAt("", workflows.StateSucceeded, workflows.StateRunning)),
		osUpdate(workersAt("", workflows.StateFailed, workflows.StateRunning)),
		osUpdate(workersAt("waiting for the next window: Sat 02:00 UTC", workflows.StatePending, workflows.StatePending)),
	} {
		if WaveKey(p) == start {
			t.Errorf("key unchanged for %+v", p.Steps[2])
		}
	}
	if WaveKey(workflows.Progress{Steps: []workflows.StepProgress{{ID: "first", Kind: "rollout", State: workflows.StatePending}}}) != "" {
		t.Error("a run whose waves have not started has a key")
	}
	if RolloutShaped(workflows.Progress{Steps: []workflows.StepProgress{{ID: "a", Kind: "action"}}}) {
		t.Error("a run without rollouts is rollout-shaped")
	}
}
