package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/chatops"
	"kedge.dev/kedge/workflows"
)

// chatFollow is a run followed in chat as `/kedge RUNBOOK CLUSTER` has
// the world's worker follow it, its posts going to a stand-in for Slack's
// response_url.
type chatFollow struct {
	recv             *receiver
	path             string
	runbook, cluster string
}

func followInChat(t *testing.T, id, runbook, cluster string) *chatFollow {
	t.Helper()
	f := &chatFollow{recv: newReceiver(t), path: "/commands/follow-" + runbook, runbook: runbook, cluster: cluster}
	fid := chatops.FollowID(id, "")
	if _, err := world.client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: fid, TaskQueue: workflows.DefaultTaskQueue},
		workflows.ChatFollowWorkflow, workflows.ChatFollowInput{WorkflowID: id, Runbook: runbook, Cluster: cluster, By: "test",
			ResponseURL: f.recv.URL + f.path, Link: "https://ui.example/" + id, StartedAt: time.Now().UTC()}); err != nil {
		t.Fatalf("follow %s in chat: %v", id, err)
	}
	t.Cleanup(func() { _ = world.client.TerminateWorkflow(context.Background(), fid, "", "test over") })
	return f
}

// waves waits for the run's result in chat and returns the wave posts
// before it, checked: each tells the waves (one line per wave started),
// none came sooner than a minute after the one before (chat.follow's
// default spacing), and none was posted after the result.
func (f *chatFollow) waves(t *testing.T) []posted {
	t.Helper()
	result := f.recv.wait(t, time.Minute, "the result posted to chat", resultPost(f.path))
	head := "*" + f.runbook + "* on *" + f.cluster + "*:\n"
	var waves []posted
	for _, p := range f.recv.all() {
		if p.Path != f.path || !strings.Contains(p.Text, head) {
			continue
		}
		if n := len(waves); n > 0 && p.At.Sub(waves[n-1].At) < 55*time.Second {
			t.Errorf("two wave posts %s apart:\n%s\n%s", p.At.Sub(waves[n-1].At).Round(time.Second), waves[n-1].Text, p.Text)
		}
		if p.At.After(result.At) {
			t.Errorf("a wave post after the result: %s", p.Text)
		}
		waves = append(waves, p)
	}
	for _, w := range waves {
		t.Logf("wave post: %s", w.Text)
	}
	t.Logf("result post: %s", result.Text)
	return waves
}
