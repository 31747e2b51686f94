package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/internal/codec"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// against the real server (integration tests with KEDGE_RECORD_HISTORY set,
// see `make record-histories`). A change to the workflow that would break
// running runbooks fails here: put it behind workflow.GetVersion, or, when
// the break is deliberate, record the histories again in the same change.
func TestReplayRecordedHistories(t *testing.T) {
	files, _ := filepath.Glob("testdata/replay/*.json")
	files = goodHistories(files)
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/replay")
	}
	opts := replayerOptions(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
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
//     lab/node/controller-1).
func TestReplayRefusesIncompatibleHistories(t *testing.T) {
	files, _ := filepath.Glob("testdata/replay/bad-*.json")
	if len(files) < 2 {
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
	r, err := worker.NewWorkflowReplayerWithOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	Register(r) // the runbook by name and as itself, the rollout, the compensation
	data, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	hist, err := client.HistoryFromJSON(data, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Replay under the recorded workflow ID: children's IDs extend it
	// (PARENT/STEP), and a child command is matched by its ID.
	var ropts worker.ReplayWorkflowHistoryOptions
	if start := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes(); start.GetWorkflowId() != "" {
		ropts.OriginalExecution = workflow.Execution{ID: start.GetWorkflowId(), RunID: start.GetOriginalExecutionRunId()}
	}
	return r.ReplayWorkflowHistoryWithOptions(nil, hist, ropts)
}
