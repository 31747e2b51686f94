package workflows

import (
	"os"
	"path/filepath"
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
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/replay")
	}
	// The histories are sealed with a test-only key kept beside them.
	var opts worker.WorkflowReplayerOptions
	if key, err := os.ReadFile("testdata/replay/codec.key"); err == nil {
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
		// change (--accept-unbound-payloads).
		var co client.Options
		cd.AcceptUnbound().Apply(&co)
		opts.DataConverter, opts.FailureConverter = co.DataConverter, co.FailureConverter
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := worker.NewWorkflowReplayerWithOptions(opts)
			if err != nil {
				t.Fatal(err)
			}
			Register(r) // the runbook by name and as itself, the rollout, the compensation
			data, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer data.Close()
			hist, err := client.HistoryFromJSON(data, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Replay under the recorded workflow ID: children's IDs extend
			// it (PARENT/STEP), and a child command is matched by its ID.
			var opts worker.ReplayWorkflowHistoryOptions
			if start := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes(); start.GetWorkflowId() != "" {
				opts.OriginalExecution = workflow.Execution{ID: start.GetWorkflowId(), RunID: start.GetOriginalExecutionRunId()}
			}
			if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, opts); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
