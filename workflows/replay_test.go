package workflows

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/internal/codec"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// against the real server (integration tests with KEDGE_RECORD_HISTORY set,
// see `make record-histories`). A change to the workflow that would break
// running runbooks fails here: put it behind workflow.GetVersion, or, when
// the break is deliberate, record the histories again in the same change.
//
// Two generations are kept: testdata/replay holds runs recorded before
// Temporal retried actions (runs in flight then finish on the workflow's
// own loop), testdata/replay/retries those recorded since.
func TestReplayRecordedHistories(t *testing.T) {
	before, _ := filepath.Glob("testdata/replay/*.json")
	since, _ := filepath.Glob("testdata/replay/retries/*.json")
	files := goodHistories(append(before, since...))
	if len(goodHistories(before)) == 0 || len(since) == 0 {
		t.Fatal("no recorded histories in testdata/replay or testdata/replay/retries")
	}
	opts := replayerOptions(t)
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "testdata/replay/"), func(t *testing.T) {
			if err := replay(t, opts, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// TestReplayRefusesIncompatibleHistories replays histories that no
// version of the workflow made, each a recorded one with one thing
// changed, and expects replay to fail as nondeterministic: the replayer
// really compares what the workflow does with what the history says.
//
//   - bad-activity-type.json: hello.json with the first step's activity
//     recorded as host.write-file (the runbook runs host.run);
//   - bad-child-id.json: ui-rollout.json with its first node runbook
//     started under lab/node/controller-9 (the rollout names it
//     lab/node/controller-1);
//   - bad-continue-restart.json: rollout-continue-2.json (a rollout's
//     second run, after a continue-as-new) with its first node runbook
//     started under lab/node/can-1, the first run's first item, as a
//     rollout that started over instead of carrying its state would.
func TestReplayRefusesIncompatibleHistories(t *testing.T) {
	files, _ := filepath.Glob("testdata/replay/bad-*.json")
	if len(files) < 3 {
		t.Fatalf("want the deliberately bad histories in testdata/replay, found %v", files)
	}
	opts := replayerOptions(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			err := replay(t, opts, f)
			if err == nil || !strings.Contains(err.Error(), "nondeterministic") {
				t.Fatalf("replay of %s: %v, want a nondeterminism error", f, err)
			}
		})
	}
}

// A rollout that continued as new is recorded run by run
// (integration/continue_test.go: 5 items, 2 a run): each run but the last
// ends in a continue-as-new, and the next starts with what the one before
// carried over. The replay of a continued run reads that state: with it
// dropped, the rollout would start over at the first item, and the
// replay fails.
func TestReplayOfAContinuedRolloutReadsItsCarriedState(t *testing.T) {
	opts := replayerOptions(t)
	runs := []*historypb.History{
		loadHistory(t, "testdata/replay/rollout-continue-1.json"),
		loadHistory(t, "testdata/replay/rollout-continue-2.json"),
		loadHistory(t, "testdata/replay/rollout-continue-3.json"),
	}
	for i, want := range []struct {
		next int
		done string
	}{{0, "[]"}, {2, "[can-1 can-2]"}, {4, "[can-1 can-2 can-3 can-4]"}} {
		ev := runs[i].GetEvents()
		start := ev[0].GetWorkflowExecutionStartedEventAttributes()
		var in RolloutInput
		if err := opts.DataConverter.FromPayloads(start.GetInput(), &in); err != nil {
			t.Fatalf("run %d's input: %v", i+1, err)
		}
		if in.ItemsPerRun != 2 || in.State.Next != want.next || in.State.Runs != i || fmt.Sprint(items(in.State.Done)) != want.done {
			t.Errorf("run %d starts with %d a run, state %+v; want next %d, %d runs, done %s", i+1, in.ItemsPerRun, in.State, want.next, i, want.done)
		}
		last := ev[len(ev)-1]
		if i == len(runs)-1 {
			if last.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
				t.Errorf("the last run ends with %s", last.GetEventType())
			}
			continue
		}
		can := last.GetWorkflowExecutionContinuedAsNewEventAttributes()
		next := runs[i+1].GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
		if can == nil || next.GetContinuedExecutionRunId() != start.GetOriginalExecutionRunId() {
			t.Errorf("run %d ends with %s, and run %d does not continue it", i+1, last.GetEventType(), i+2)
		}
	}

	// The second run with its carried state dropped: refused.
	start := runs[1].GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	var in RolloutInput
	if err := opts.DataConverter.FromPayloads(start.GetInput(), &in); err != nil {
		t.Fatal(err)
	}
	if err := replayHistory(t, opts, runs[1]); err != nil {
		t.Fatalf("the second run as recorded: %v", err)
	}
	in.State = RolloutState{}
	p, err := opts.DataConverter.ToPayloads(in)
	if err != nil {
		t.Fatal(err)
	}
	start.Input = p
	if err := replayHistory(t, opts, runs[1]); err == nil || !strings.Contains(err.Error(), "nondeterministic") {
		t.Fatalf("the second run without its carried state replayed with %v, want a nondeterminism error", err)
	}
}

func goodHistories(files []string) []string {
	var good []string
	for _, f := range files {
		if !strings.HasPrefix(filepath.Base(f), "bad-") {
			good = append(good, f)
		}
	}
	return good
}

// replayerOptions decodes the recorded payloads: they are sealed with a
// test-only key kept beside the histories.
func replayerOptions(t *testing.T) worker.WorkflowReplayerOptions {
	var opts worker.WorkflowReplayerOptions
	key, err := os.ReadFile("testdata/replay/codec.key")
	if err != nil {
		return opts
	}
	p := filepath.Join(t.TempDir(), "codec.key")
	if err := os.WriteFile(p, key, 0o600); err != nil {
		t.Fatal(err)
	}
	cd, err := codec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	// Histories recorded before payloads were bound to their run are
	// sealed unbound: they replay as on a worker upgraded across that
	// change (--accept-unbound-payloads). The others are bound to the
	// namespace they were recorded in, the test world's "default".
	var co client.Options
	cd.AcceptUnbound().ReplayedIn("default").Apply(&co)
	opts.DataConverter, opts.FailureConverter = co.DataConverter, co.FailureConverter
	return opts
}

// replay replays one history file on the workflows as registered now.
func replay(t *testing.T, opts worker.WorkflowReplayerOptions, file string) error {
	return replayHistory(t, opts, loadHistory(t, file))
}

func loadHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	data, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	hist, err := client.HistoryFromJSON(data, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return hist
}

func replayHistory(t *testing.T, opts worker.WorkflowReplayerOptions, hist *historypb.History) error {
	r, err := worker.NewWorkflowReplayerWithOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	Register(r) // the runbook by name and as itself, the rollout, the compensation
	// Replay under the recorded workflow ID: children's IDs extend it
	// (PARENT/STEP), and a child command is matched by its ID.
	var ropts worker.ReplayWorkflowHistoryOptions
	if start := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes(); start.GetWorkflowId() != "" {
		ropts.OriginalExecution = workflow.Execution{ID: start.GetWorkflowId(), RunID: start.GetOriginalExecutionRunId()}
	}
	return r.ReplayWorkflowHistoryWithOptions(nil, hist, ropts)
}

// The two generations of recorded histories run their actions each on
// its own path: before, every attempt an activity of one attempt; since,
// one activity per call, named by step and host, that Temporal retries.
func TestRecordedHistoriesTakeTheirRetryPath(t *testing.T) {
	for _, gen := range []struct {
		glob  string
		since bool
	}{{"testdata/replay/*.json", false}, {"testdata/replay/retries/*.json", true}} {
		files, _ := filepath.Glob(gen.glob)
		calls := 0
		for _, f := range goodHistories(files) {
			for _, e := range loadHistory(t, f).GetEvents() {
				a := e.GetActivityTaskScheduledEventAttributes()
				if a == nil || a.GetActivityType().GetName() == AdmitRunActivity {
					continue
				}
				_, _, _, named := attempt.ParseID(a.GetActivityId())
				max := a.GetRetryPolicy().GetMaximumAttempts()
				switch {
				case named && !gen.since, named && max <= 1:
					t.Errorf("%s: %s scheduled as %q with MaximumAttempts %d", f, a.GetActivityType().GetName(), a.GetActivityId(), max)
				case named:
					calls++
				case !gen.since && max == 1:
					calls++
				}
			}
		}
		if calls == 0 {
			t.Errorf("%s: no action ran on its path in these histories", gen.glob)
		}
	}
}

// A run Temporal retries replays only with its version marker: with the
// marker of the temporal-retries change taken for another change's, the
// workflow takes the path of the runs before (an activity per attempt,
// retried by the workflow) and the replay fails. So the change is
// versioned, not merely compatible.
func TestReplayOfARetriedRunNeedsItsVersion(t *testing.T) {
	opts := replayerOptions(t)
	hist := loadHistory(t, "testdata/replay/retries/hello.json")
	if err := replayHistory(t, opts, hist); err != nil {
		t.Fatalf("as recorded: %v", err)
	}
	start := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	dc := converter.WithDataConverterSerializationContext(opts.DataConverter, converter.WorkflowSerializationContext{
		Namespace: "default", WorkflowID: start.GetWorkflowId()})
	var ours, other *historypb.MarkerRecordedEventAttributes
	for _, e := range hist.GetEvents() {
		m := e.GetMarkerRecordedEventAttributes()
		if m == nil {
			continue
		}
		var change string
		if err := dc.FromPayloads(m.GetDetails()["change-id"], &change); err != nil {
			t.Fatalf("a marker's change id: %v", err)
		}
		if change == retriesChange {
			ours = m
		} else if other == nil {
			other = m
		}
	}
	if ours == nil || other == nil {
		t.Fatalf("the history lacks the %s marker or another", retriesChange)
	}
	ours.Details["change-id"] = other.Details["change-id"]
	// TMPRL1100 is the SDK's code for nondeterminism: here the recorded
	// activity (step/host#n) is not one the old path schedules.
	if err := replayHistory(t, opts, hist); err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("without its version marker: %v, want a nondeterminism error", err)
	}
}
