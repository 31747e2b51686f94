package runs

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	activitypb "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	workflowpb "go.temporal.io/api/workflow/v1"

	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/workflows"
)

// A step whose action Temporal is retrying shows the attempt it is on,
// for its host; pending activities of other steps, of a first attempt,
// or not named by Kedge change nothing.
func TestWithPendingShowsTheAttemptUnderWay(t *testing.T) {
	p := workflows.Progress{Steps: []workflows.StepProgress{
		{ID: "swap", State: workflows.StateRunning, Hosts: []workflows.HostProgress{{Name: "w1"}, {Name: "w2"}}},
		{ID: "check", State: workflows.StateRunning},
		{ID: "done", State: workflows.StateSucceeded, Attempts: 1},
	}}
	why := func(a *workflowpb.PendingActivityInfo) string { return a.GetLastFailure().GetMessage() }
	withPending(&p, []*workflowpb.PendingActivityInfo{
		{ActivityId: attempt.ID("swap", "w2", 7, 3), Attempt: 3, LastFailure: &failurepb.Failure{Message: "exit status 1"}},
		{ActivityId: attempt.ID("check", "", 8, 3), Attempt: 2},
		{ActivityId: attempt.ID("swap", "w1", 9, 3), Attempt: 1},
		{ActivityId: attempt.ID("done", "", 3, 3), Attempt: 4},
		{ActivityId: "12", Attempt: 5},
	}, why)
	swap, check, done := p.Steps[0], p.Steps[1], p.Steps[2]
	if swap.Attempts != 3 || swap.Hosts[0].Attempts != 0 || swap.Hosts[1].Attempts != 3 ||
		swap.LastError != "w2: exit status 1" || swap.Hosts[1].LastError != "exit status 1" || swap.Hosts[0].LastError != "" {
		t.Errorf("swap: %+v", swap)
	}
	if check.Attempts != 2 {
		t.Errorf("check: %+v", check)
	}
	if done.Attempts != 1 {
		t.Errorf("a step that ended took a pending attempt: %+v", done)
	}
}

// A pending activity's last failure is sealed by the codec (its message
// too): the front end opens it with its own codec, in the activity's
// context; without the codec it reads nothing.
func TestOpenerOpensASealedLastFailure(t *testing.T) {
	key := filepath.Join(t.TempDir(), "codec.key")
	if _, err := codec.Generate(key); err != nil {
		t.Fatal(err)
	}
	cd, err := codec.Load(key)
	if err != nil {
		t.Fatal(err)
	}
	var opts client.Options
	cd.Apply(&opts)
	sc := converter.ActivitySerializationContext{Namespace: "default", WorkflowID: "rb/c/1", ActivityType: "host.run", TaskQueue: "kedge"}
	fc := opts.FailureConverter.(converter.FailureConverterWithSerializationContext).WithSerializationContext(sc)
	f := fc.ErrorToFailure(errors.New("sign a login certificate: connection refused"))
	if strings.Contains(f.String(), "connection refused") {
		t.Fatalf("the failure is not sealed: %v", f)
	}
	a := &workflowpb.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: "host.run"}, LastFailure: f,
		ActivityOptions: &activitypb.ActivityOptions{TaskQueue: &taskqueuepb.TaskQueue{Name: "kedge"}}}
	if got := (Opener{Namespace: "default", DataConverter: opts.DataConverter}).lastFailure("rb/c/1")(a); !strings.Contains(got, "sign a login certificate") {
		t.Errorf("opened %q", got)
	}
	if got := (Opener{}).lastFailure("rb/c/1")(a); got != "" {
		t.Errorf("without the codec: %q", got)
	}
}
