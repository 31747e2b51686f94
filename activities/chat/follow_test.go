package chat

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/workflows"
)

// fakeSlack records posts to response_urls (/hook) and chat.postMessage
// calls (/api/chat.postMessage).
type fakeSlack struct {
	*httptest.Server
	mu    sync.Mutex
	hooks []string
	api   []url.Values
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		switch r.URL.Path {
		case "/hook":
			var m struct{ Text string }
			_ = json.Unmarshal(body, &m)
			f.hooks = append(f.hooks, m.Text)
			_, _ = w.Write([]byte("ok"))
		case "/api/chat.postMessage":
			v, _ := url.ParseQuery(string(body))
			if r.Header.Get("Authorization") != "Bearer xoxb-test" && v.Get("token") != "xoxb-test" {
				t.Errorf("chat.postMessage without the bot token")
			}
			f.api = append(f.api, v)
			_, _ = w.Write([]byte(`{"ok":true,"channel":"C0OPS","ts":"1.2"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSlack) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hooks), len(f.api)
}

// A response_url takes 5 posts within 30 minutes: the follower keeps the
// last ones for pauses and the result, and goes on through the bot token
// (when there is one) once the URL is spent or expired.
func TestNotifierSpendsTheResponseURLWisely(t *testing.T) {
	f := newFakeSlack(t)
	in := workflows.ChatFollowInput{WorkflowID: "w", ResponseURL: f.URL + "/hook", Channel: "C0OPS", StartedAt: time.Now()}
	msg := slackmsg.TextMessage(slackmsg.InChannel, "progress")

	n := &Notifier{}
	var st followState
	for range 4 {
		if !n.post(t.Context(), in, &st, msg, 1) {
			t.Fatal("a post within the budget failed")
		}
	}
	if n.post(t.Context(), in, &st, msg, 1) {
		t.Error("the last post of the response_url was spent on progress")
	}
	if !n.post(t.Context(), in, &st, slackmsg.TextMessage(slackmsg.InChannel, "result"), 0) {
		t.Error("the result was not posted")
	}
	if hooks, api := f.counts(); hooks != 5 || api != 0 || st.Posts != 5 {
		t.Errorf("%d posts to the response_url, %d to the API, %d counted", hooks, api, st.Posts)
	}
	if n.post(t.Context(), in, &st, msg, 0) {
		t.Error("a sixth post to a response_url")
	}

	n.BotToken, n.SlackAPIURL = "xoxb-test", f.URL+"/api/"
	if !n.post(t.Context(), in, &st, msg, 0) {
		t.Error("the bot token was not used once the response_url was spent")
	}
	old := in
	old.StartedAt = time.Now().Add(-31 * time.Minute)
	if !n.post(t.Context(), old, &followState{}, slackmsg.PauseMessage(old, runs.Pause{Kind: runs.PauseApproval, Target: "w", Step: "gate"}), 1) {
		t.Error("the bot token was not used once the response_url expired")
	}
	hooks, api := f.counts()
	if hooks != 5 || api != 2 {
		t.Fatalf("%d posts to the response_url, %d to the API", hooks, api)
	}
	if f.api[1].Get("channel") != "C0OPS" || !strings.Contains(f.api[1].Get("blocks"), slackmsg.ActionContinue) {
		t.Errorf("chat.postMessage got %v", f.api[1])
	}
}

// Wave changes are posted once settled, at most once a minute: changes
// close together make one post, changes within the minute wait for its
// end, and a change undone before it settled is not posted.
func TestWaveDueCoalescesAndSpaces(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var st followState
	settle, every := 5*time.Second, time.Minute
	due := func(key string, s int) bool {
		if !waveDue(&st, key, at(s), settle, every) {
			return false
		}
		st.WaveKey, st.WaveSince, st.LastProgress = key, time.Time{}, at(s)
		return true
	}
	for _, c := range []struct {
		key  string
		s    int
		want bool
	}{
		{"", 0, false},                                // nothing started
		{"first|running", 1, false},                   // a wave started: settling
		{"first|succeeded;approve|waiting", 3, false}, // and ended: still one change
		{"first|succeeded;approve|waiting", 6, true},  // settled: posted
		{"workers|running", 10, false},
		{"workers|running", 30, false},    // settled, within the minute
		{"workers|running|1", 66, true},   // the minute over: where it is then
		{"workers|running|2", 130, false}, // settling
		{"workers|running|1", 131, false}, // undone: nothing to post
		{"workers|running|1", 200, false},
	} {
		if got := due(c.key, c.s); got != c.want {
			t.Errorf("at %ds, key %q: due %v, want %v", c.s, c.key, got, c.want)
		}
	}
}
