package team

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/workflows"
)

// The team's Temporal authorizes every call by certificate role: the
// install's own programs and Temporal's system worker are refused
// nothing. A schedule the operator creates starts its run (the scheduler
// runs in Temporal's system worker, with the server's certificate), and
// the server's log holds no refused call up to then: not from the two
// workers polling, the webhook, `kedge setup`, the Web UI or the system
// worker. (The attacker's side: integration/mtls_authz_test.go.)
func TestTeamServicesAreRefusedNothing(t *testing.T) {
	logsOnFailure(t)
	ctx := t.Context()
	h, err := world.client.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:     "authz-schedule",
		Action: &client.ScheduleWorkflowAction{ID: "authz-scheduled", Workflow: workflows.RunbookWorkflow, TaskQueue: "authz-nobody"},
		Paused: true, // started by the trigger below only
	})
	if err != nil {
		t.Fatalf("the operator's schedule: %v", err)
	}
	defer func() { _ = h.Delete(ctx) }()
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatalf("trigger: %v", err)
	}
	var started string
	eventually(t, time.Minute, "the scheduled run", func() bool {
		d, err := h.Describe(ctx)
		if err != nil || len(d.Info.RecentActions) == 0 {
			return false
		}
		started = d.Info.RecentActions[0].StartWorkflowResult.WorkflowID
		return true
	})
	if err := world.client.TerminateWorkflow(ctx, started, "", "authz test done"); err != nil {
		t.Errorf("terminate the scheduled run %s: %v", started, err)
	}
	for _, line := range strings.Split(world.team.Logs("temporal"), "\n") {
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "temporal: call refused" {
			t.Errorf("the server refused one of the install's calls: %s", line)
		}
	}
}
