package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/types/known/timestamppb"

	"kedge.dev/kedge/workflows"
)

// The activity environment's run: the one asking for admission.
const (
	selfID    = "default-test-workflow-id"
	selfRunID = "default-test-run-id"
)

// visibility answers the admitter's two questions from a fixed list of
// open runs: the runs of its own workflow ID (none but itself), and the
// open runs under RUNBOOK/CLUSTER/.
type visibility struct {
	client.Client
	open    []*workflowpb.WorkflowExecutionInfo
	started time.Time       // this run's start, for DescribeWorkflowExecution
	closed  map[string]bool // run IDs listed open that have ended
	queries []string
}

func (v *visibility) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	v.queries = append(v.queries, req.GetQuery())
	if strings.Contains(req.GetQuery(), "STARTS_WITH") {
		return &workflowservice.ListWorkflowExecutionsResponse{Executions: v.open}, nil
	}
	return &workflowservice.ListWorkflowExecutionsResponse{}, nil
}

func (v *visibility) DescribeWorkflowExecution(_ context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	info := run(id, runID, "runbook", v.started)
	info.Status = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if v.closed[runID] {
		info.Status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil
}

func run(id, runID, typ string, started time.Time) *workflowpb.WorkflowExecutionInfo {
	return &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Type:      &commonpb.WorkflowType{Name: typ},
		StartTime: timestamppb.New(started),
	}
}

func admit(t *testing.T, v *visibility, in workflows.AdmitRunInput) workflows.AdmitRunResult {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	a := &admitter{client: v}
	env.RegisterActivity(a.AdmitRun)
	in.WorkflowID, in.RunID = selfID, selfRunID
	val, err := env.ExecuteActivity(a.AdmitRun, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.AdmitRunResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// A schedule's run is skipped while an earlier run of its runbook is open
// on its cluster. Children, rollouts, runs that started later or have
// ended do not hold the cluster; a front door's run is not checked here.
func TestAdmissionSkipsAScheduledRunBesideAnEarlierOne(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	child := run("gated/lab/1/sub", "c1", "gated", t0.Add(-time.Hour))
	child.ParentExecution = &commonpb.WorkflowExecution{WorkflowId: "gated/lab/1", RunId: "r1"}
	for name, c := range map[string]struct {
		open      []*workflowpb.WorkflowExecutionInfo
		closed    map[string]bool
		scheduled bool
		want      string // "" admitted
	}{
		"beside one that just ended":   {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/1", "r1", "gated", t0.Add(-time.Hour))}, closed: map[string]bool{"r1": true}},
		"alone":                        {scheduled: true},
		"only itself listed":           {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run(selfID, selfRunID, "gated", t0)}},
		"beside one":                   {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/20261126-110000-ab12", "r1", "gated", t0.Add(-time.Hour))}, want: "gated already runs on lab: gated/lab/20261126-110000-ab12; this scheduled run is skipped"},
		"beside another scheduled one": {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/scheduled-2026-11-26T11:59:00Z", "r1", "runbook", t0.Add(-time.Minute))}, want: "gated already runs on lab: gated/lab/scheduled-2026-11-26T11:59:00Z; this scheduled run is skipped"},
		"a front door's run":           {open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/1", "r1", "gated", t0.Add(-time.Minute))}},
		"one started later":            {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/2", "r2", "gated", t0.Add(time.Second))}},
		"a child, a rollout":           {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{child, run("gated/lab/3", "r3", workflows.RolloutWorkflow, t0.Add(-time.Hour))}},
	} {
		t.Run(name, func(t *testing.T) {
			res := admit(t, &visibility{open: c.open, closed: c.closed, started: t0}, workflows.AdmitRunInput{Runbook: "gated", Cluster: "lab", Scheduled: c.scheduled})
			if c.want == "" && (!res.Admitted || res.Reason != "") {
				t.Errorf("refused: %+v", res)
			}
			if c.want != "" && (res.Admitted || res.Reason != c.want) {
				t.Errorf("%+v, want refused with %q", res, c.want)
			}
		})
	}
}

// Two runs that started together (the same millisecond, as visibility
// keeps it, or a moment apart) each see the other: exactly one of them
// is before the other, so exactly one is refused, whichever asks first
// (two schedules of one runbook on one cluster firing together).
func TestAdmissionOfTwoRacingRunsRefusesOne(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, ids := range [][2]string{{"run-a", "run-b"}, {"run-b", "run-a"}} {
		for _, delta := range []time.Duration{-time.Millisecond, 0, 300 * time.Microsecond, time.Millisecond, time.Minute} {
			a, b := t0, t0.Add(delta)
			if before(a, ids[0], b, ids[1]) == before(b, ids[1], a, ids[0]) {
				t.Errorf("%s at %s and %s at %s: both or neither go first", ids[0], a, ids[1], b)
			}
		}
	}
	// From each side, through the activity: this run (selfRunID) and
	// another started in the same millisecond.
	other := run("gated/lab/b", "a-smaller-run-id", "gated", t0.Add(300*time.Microsecond))
	if res := admit(t, &visibility{started: t0, open: []*workflowpb.WorkflowExecutionInfo{other}},
		workflows.AdmitRunInput{Runbook: "gated", Cluster: "lab", Scheduled: true}); res.Admitted {
		t.Errorf("admitted beside a run of the same millisecond with a smaller run ID: %+v", res)
	}
	other.Execution.RunId = "z-larger-run-id"
	if res := admit(t, &visibility{started: t0, open: []*workflowpb.WorkflowExecutionInfo{other}},
		workflows.AdmitRunInput{Runbook: "gated", Cluster: "lab", Scheduled: true}); !res.Admitted {
		t.Errorf("refused beside a run of the same millisecond with a larger run ID: %+v", res)
	}
}

// An input from before the check (no runbook, no cluster) is checked for
// its ID only.
func TestAdmissionOfAnOldInputLooksAtItsIDOnly(t *testing.T) {
	v := &visibility{open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/1", "r1", "gated", time.Now().Add(-time.Hour))}, started: time.Now()}
	if res := admit(t, v, workflows.AdmitRunInput{Scheduled: true}); !res.Admitted {
		t.Errorf("refused: %+v", res)
	}
	if len(v.queries) != 1 || strings.Contains(v.queries[0], "STARTS_WITH") {
		t.Errorf("queries %q, want only the ID's", v.queries)
	}
}
