package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// recordHistory writes a finished run's history to
// $KEDGE_RECORD_HISTORY/NAME.json, for the replay tests in workflows/. Run
// `make record-histories` after a deliberate workflow change.
func recordHistory(t *testing.T, id, name string) {
	t.Helper()
	dir := os.Getenv("KEDGE_RECORD_HISTORY")
	if dir == "" {
		return
	}
	var events []*historypb.HistoryEvent
	it := world.client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		events = append(events, e)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s (%d events)", name, len(events))
}
