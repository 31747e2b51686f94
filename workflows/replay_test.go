package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
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
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Runbook, workflowOptions())
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
