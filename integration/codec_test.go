package integration

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// rawHistory is a run's history exactly as Temporal stores it.
func rawHistory(t *testing.T, id string) string {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := world.client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		events = append(events, e)
	}
	data, err := protojson.Marshal(&historypb.History{Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A secret param, a command's output and an error message that carry a
// secret all reach Temporal sealed: the stored history holds none of it.
func TestSecretsNeverReachHistoryInPlainText(t *testing.T) {
	const token = "kedge-test-token-5f1c0ffee"
	const keyMarker = "BEGIN FAKE PRIVATE KEY"
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: sealed}
params:
  token: {type: string, secret: true, required: true}
steps:
  - id: use
    action: host.run
    on: worker-1
    with:
      command: 'echo "-----`+keyMarker+`-----"; echo "seen=$TOKEN" >> "$KEDGE_OUTPUT"'
      env: {TOKEN: "${ params.token }"}
  - id: fail
    needs: [use]
    action: host.run
    on: worker-1
    retry: {maxAttempts: 1}
    with:
      command: 'echo "rejected $TOKEN" >&2; exit 3'
      env: {TOKEN: "${ params.token }"}
`)
	p, code, _ := runWait(t, rb, "--set", "token="+token)
	if code == 0 {
		t.Fatal("the failing step did not fail the run")
	}
	// The secret did travel: the run's decoded progress shows the error
	// that carries it.
	if s := step(t, p, "fail"); !strings.Contains(s.LastError, "rejected "+token) {
		t.Fatalf("the decoded progress lacks the secret, so the scan below proves nothing: %+v", s)
	}
	hist := rawHistory(t, p.WorkflowID)
	for _, plain := range []string{token, keyMarker, "rejected", "seen="} {
		if strings.Contains(hist, plain) {
			t.Errorf("history holds %q in plain text", plain)
		}
	}
	// Payload data is base64 in the JSON form: no payload is left unsealed.
	for _, enc := range []string{"json/plain", "json/protobuf", "binary/plain"} {
		if strings.Contains(hist, base64.StdEncoding.EncodeToString([]byte(enc))) {
			t.Errorf("history holds an unsealed %s payload", enc)
		}
	}
	if !strings.Contains(hist, base64.StdEncoding.EncodeToString([]byte("binary/encrypted"))) {
		t.Error("history holds no sealed payload at all")
	}
}
