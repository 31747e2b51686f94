package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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
	mainLane.join(t)
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
// stored payloads. It will not start without a token; without the token
// (or from another origin) it decodes nothing; a browser logged in with
// the token decodes from the UI's pages, the CLI with it as a Bearer.
func TestCodecServerDecodesStoredPayloadsForTheWebUI(t *testing.T) {
	mainLane.join(t)
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
	var sealed []map[string]any
	it := world.client.GetWorkflowHistory(t.Context(), p.WorkflowID, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil {
			for _, pl := range a.GetResult().GetPayloads() {
				// The body the UI posts: payloads as protobuf JSON.
				b, err := protojson.Marshal(pl)
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				sealed = append(sealed, m)
			}
		}
	}
	if len(sealed) == 0 {
		t.Fatal("no activity result in the history")
	}

	addr := freeLoopbackAddr(t)
	const ui = "http://127.0.0.1:8233"
	codecServer := func(args ...string) *exec.Cmd {
		cmd := exec.Command(world.kedgeBin, append([]string{"codec-server", "--listen", addr, "--ui-origin", ui}, args...)...)
		cmd.Env = append(os.Environ(), "KEDGE_CODEC_KEY="+world.codecKey)
		return cmd
	}
	// Without a token it refuses to start.
	if out, err := codecServer().CombinedOutput(); err == nil || !strings.Contains(string(out), "--token-file is required") {
		t.Fatalf("codec-server without a token: %v: %s", err, out)
	}
	tokenFile := filepath.Join(t.TempDir(), "codec-token")
	if _, errOut, code := kedge(t, "codec", "token", "--out", tokenFile); code != 0 {
		t.Fatalf("kedge codec token: exit %d: %s", code, errOut)
	}
	tokenBytes, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	srv := codecServer("--token-file", tokenFile)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	endpoint := "http://" + addr
	eventually(t, 10*time.Second, "codec-server to answer", func() bool {
		resp, err := http.Get(endpoint + "/login")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	for _, c := range []struct{ name, origin, auth string }{
		{"no token, the UI's origin", ui, ""},
		{"no token, no origin", "", ""},
		{"a wrong token", "", "Bearer " + strings.Repeat("f", len(token))},
		{"the token, from another origin's page", "http://evil.example", "Bearer " + token},
	} {
		if status, plain := decodeCall(t, http.DefaultClient, endpoint, c.origin, c.auth, sealed); status == http.StatusOK || strings.Contains(plain, marker) {
			t.Errorf("%s: decoded (%d) %q", c.name, status, plain)
		}
	}
	if status, plain := decodeCall(t, http.DefaultClient, endpoint, "", "Bearer "+token, sealed); status != http.StatusOK || !strings.Contains(plain, marker) {
		t.Errorf("the token as a Bearer: %d %q", status, plain)
	}
	// An operator's browser logs in once with the token; the UI's pages
	// then decode with the session cookie.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.PostForm(endpoint+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != ui+"/" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	status, plain := decodeCall(t, browser, endpoint, ui, "", sealed)
	if status != http.StatusOK || !strings.Contains(plain, marker) {
		t.Errorf("the logged-in browser on the UI's page: %d %q", status, plain)
	}
}
