package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
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
	assertSealed(t, p.WorkflowID)
}

// assertSealed checks that every payload of a run's stored history is
// sealed by the codec, search attributes aside: Temporal indexes those, so
// they are plain by design and Kedge puts only names in them (cluster,
// runbook, node, status).
func assertSealed(t *testing.T, id string) {
	t.Helper()
	sealed := 0
	it := world.client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		walkPayloads(e.ProtoReflect(), e.GetEventType().String(), func(where string, pl *commonpb.Payload) {
			if enc := string(pl.GetMetadata()["encoding"]); enc != "binary/encrypted" {
				t.Errorf("%s: an unsealed %s payload in %s", id, enc, where)
				return
			}
			sealed++
		})
	}
	if sealed == 0 {
		t.Errorf("%s: no sealed payload at all", id)
	}
}

// walkPayloads calls f on every Payload under m, except under
// SearchAttributes.
func walkPayloads(m protoreflect.Message, where string, f func(string, *commonpb.Payload)) {
	if pl, ok := m.Interface().(*commonpb.Payload); ok {
		f(where, pl)
		return
	}
	if _, ok := m.Interface().(*commonpb.SearchAttributes); ok {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := where + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				walkPayloads(v.List().Get(i).Message(), name, f)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				walkPayloads(mv.Message(), name, f)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			walkPayloads(v.Message(), name, f)
		}
		return true
	})
}

// The Web UI shows operators what the history holds by sending its sealed
// payloads to `kedge codec-server`, as here: the real binary, the real
// stored payloads.
func TestCodecServerDecodesStoredPayloadsForTheWebUI(t *testing.T) {
	const marker = "kedge-ui-can-read-this-0b5e"
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: ui-decode}
params:
  word: {type: string, required: true}
steps:
  - id: say
    action: host.run
    on: worker-1
    with:
      command: 'echo "said=$WORD" >> "$KEDGE_OUTPUT"'
      env: {WORD: "${ params.word }"}
`)
	p, code, errOut := runWait(t, rb, "--set", "word="+marker)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sealed []*commonpb.Payload
	it := world.client.GetWorkflowHistory(t.Context(), p.WorkflowID, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil {
			sealed = append(sealed, a.GetResult().GetPayloads()...)
		}
	}
	if len(sealed) == 0 {
		t.Fatal("no activity result in the history")
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const ui = "http://127.0.0.1:8233"
	srv := exec.Command(world.kedgeBin, "codec-server", "--listen", addr, "--ui-origin", ui)
	srv.Env = append(os.Environ(), "KEDGE_CODEC_KEY="+world.codecKey)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })

	// The body the UI posts: payloads as protobuf JSON.
	var items []json.RawMessage
	for _, pl := range sealed {
		b, err := protojson.Marshal(pl)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, b)
	}
	body, _ := json.Marshal(map[string]any{"payloads": items})
	var resp *http.Response
	eventually(t, 10*time.Second, "codec-server to answer", func() bool {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", ui)
		req.Header.Set("X-Namespace", "default")
		resp, err = http.DefaultClient.Do(req)
		return err == nil
	})
	defer resp.Body.Close()
	var got struct {
		Payloads []struct {
			Data string `json:"data"`
		} `json:"payloads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("decode: status %d: %v", resp.StatusCode, err)
	}
	found := false
	for _, pl := range got.Payloads {
		data, _ := base64.StdEncoding.DecodeString(pl.Data)
		found = found || strings.Contains(string(data), "said="+marker) || strings.Contains(string(data), marker)
	}
	if !found {
		t.Errorf("the decoded payloads lack the step's output %q", marker)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != ui {
		t.Errorf("the UI's origin is not allowed: %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
}
