package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
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
	// schedules are the schedules Temporal knows, by ID; listedAfter
	// is how many times a schedule is described before it lists its runs.
	schedules   map[string]*client.ScheduleDescription
	listedAfter int
	described   int
}

func (v *visibility) ScheduleClient() client.ScheduleClient { return scheduleClient{v: v} }

type scheduleClient struct {
	client.ScheduleClient
	v *visibility
}

func (c scheduleClient) GetHandle(_ context.Context, id string) client.ScheduleHandle {
	return scheduleHandle{v: c.v, id: id}
}

type scheduleHandle struct {
	client.ScheduleHandle
	v  *visibility
	id string
}

func (h scheduleHandle) Describe(context.Context) (*client.ScheduleDescription, error) {
	d, ok := h.v.schedules[h.id]
	if !ok {
		return nil, serviceerror.NewNotFound("schedule not found")
	}
	h.v.described++
	if h.v.described <= h.v.listedAfter {
		cp := *d
		cp.Info.RecentActions, cp.Info.RunningWorkflows = nil, nil
		return &cp, nil
	}
	return d, nil
}

// startedBy is a schedule made at made that started this run (selfID,
// selfRunID) and is running it.
func startedBy(made time.Time) *client.ScheduleDescription {
	self := client.ScheduleWorkflowExecution{WorkflowID: selfID, FirstExecutionRunID: selfRunID}
	return &client.ScheduleDescription{Info: client.ScheduleInfo{
		CreatedAt:        made,
		LastUpdateAt:     time.Unix(0, 0), // never updated, as the SDK describes it
		RecentActions:    []client.ScheduleActionResult{{StartWorkflowResult: &self}},
		RunningWorkflows: []client.ScheduleWorkflowExecution{self},
	}}
}

func (v *visibility) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	v.queries = append(v.queries, req.GetQuery())
	if strings.Contains(req.GetQuery(), "STARTS_WITH") {
		return &workflowservice.ListWorkflowExecutionsResponse{Executions: v.open}, nil
	}
	return &workflowservice.ListWorkflowExecutionsResponse{}, nil
}

func (v *visibility) DescribeWorkflowExecution(_ context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if runID == "" { // by ID alone (chat's old IDs): no such run here
		return nil, serviceerror.NewNotFound("workflow not found: " + id)
	}
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
	a := &admitter{client: v, scheduleWait: 50 * time.Millisecond, scheduleEvery: time.Millisecond}
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

// A run is refused (a schedule's skipped) while an earlier run of its
// runbook is open on its cluster, whichever door started it. Children,
// rollouts, runs that started later or have ended do not hold the
// cluster.
func TestAdmissionRefusesARunBesideAnEarlierOne(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	child := run("gated/lab/1/sub", "c1", "gated", t0.Add(-time.Hour))
	child.ParentExecution = &commonpb.WorkflowExecution{WorkflowId: "gated/lab/1", RunId: "r1"}
	for name, c := range map[string]struct {
		open      []*workflowpb.WorkflowExecutionInfo
		closed    map[string]bool
		scheduled bool
		want      string // "" admitted
	}{
		"beside one that just ended":    {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/1", "r1", "gated", t0.Add(-time.Hour))}, closed: map[string]bool{"r1": true}},
		"alone":                         {scheduled: true},
		"only itself listed":            {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run(selfID, selfRunID, "gated", t0)}},
		"beside one":                    {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/20261126-110000-ab12", "r1", "gated", t0.Add(-time.Hour))}, want: "gated already runs on lab: gated/lab/20261126-110000-ab12; this scheduled run is skipped"},
		"beside another scheduled one":  {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/scheduled-2026-11-26T11:59:00Z", "r1", "runbook", t0.Add(-time.Minute))}, want: "gated already runs on lab: gated/lab/scheduled-2026-11-26T11:59:00Z; this scheduled run is skipped"},
		"a front door's run beside one": {open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/1", "r1", "gated", t0.Add(-time.Minute))}, want: "gated already runs on lab: gated/lab/1; one run of a runbook per cluster at a time"},
		"a front door's run alone":      {open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/1", "r1", "gated", t0.Add(time.Minute))}},
		"one started later":             {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/2", "r2", "gated", t0.Add(time.Second))}},
		"a child, a rollout":            {scheduled: true, open: []*workflowpb.WorkflowExecutionInfo{child, run("gated/lab/3", "r3", workflows.RolloutWorkflow, t0.Add(-time.Hour))}},
	} {
		t.Run(name, func(t *testing.T) {
			in := workflows.AdmitRunInput{Runbook: "gated", Cluster: "lab"}
			if c.scheduled {
				in.Scheduled, in.ScheduleID, in.IssuedAt = true, "gated/lab", t0.Add(-24*time.Hour)
			}
			v := &visibility{open: c.open, closed: c.closed, started: t0,
				schedules: map[string]*client.ScheduleDescription{"gated/lab": startedBy(t0.Add(-24 * time.Hour))}}
			res := admit(t, v, in)
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
	// From each side, through the activity: this run (selfRunID) and
	// another started in the same millisecond.
	other := run("gated/lab/b", "a-smaller-run-id", "gated", t0.Add(300*time.Microsecond))
	if res := admit(t, &visibility{started: t0, open: []*workflowpb.WorkflowExecutionInfo{other}},
		workflows.AdmitRunInput{Runbook: "gated", Cluster: "lab"}); res.Admitted {
		t.Errorf("admitted beside a run of the same millisecond with a smaller run ID: %+v", res)
	}
	other.Execution.RunId = "z-larger-run-id"
	if res := admit(t, &visibility{started: t0, open: []*workflowpb.WorkflowExecutionInfo{other}},
		workflows.AdmitRunInput{Runbook: "gated", Cluster: "lab"}); !res.Admitted {
		t.Errorf("refused beside a run of the same millisecond with a larger run ID: %+v", res)
	}
}

// An input from before the check (no runbook, no cluster) is checked for
// its ID only.
func TestAdmissionOfAnOldInputLooksAtItsIDOnly(t *testing.T) {
	v := &visibility{open: []*workflowpb.WorkflowExecutionInfo{run("gated/lab/1", "r1", "gated", time.Now().Add(-time.Hour))}, started: time.Now()}
	if res := admit(t, v, workflows.AdmitRunInput{}); !res.Admitted {
		t.Errorf("refused: %+v", res)
	}
	if len(v.queries) != 1 || strings.Contains(v.queries[0], "STARTS_WITH") {
		t.Errorf("queries %q, want only the ID's", v.queries)
	}
}

// A schedule's run is admitted only when the schedule its action was
// sealed for started it: a copy of the action started by hand under the
// schedule's run ID, an action of a deleted schedule, of a schedule
// changed since (an update by someone without the key, or a schedule made
// again under its ID with an old action), and an action sealed before
// actions were bound to their schedule are all refused.
func TestAScheduledRunIsAdmittedOnlyWhenItsScheduleStartedIt(t *testing.T) {
	made := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	notListing := startedBy(made)
	notListing.Info.RecentActions, notListing.Info.RunningWorkflows = nil, nil
	changed := startedBy(made)
	changed.Info.LastUpdateAt = made.Add(2 * time.Hour)
	madeAgain := startedBy(made.Add(3 * time.Hour))
	resealed := startedBy(made.Add(-48 * time.Hour)) // `kedge schedule` again: updated with an action sealed then
	resealed.Info.LastUpdateAt = made.Add(2 * time.Second)
	finished := startedBy(made)
	finished.Info.RunningWorkflows = nil
	for name, c := range map[string]struct {
		schedule    *client.ScheduleDescription
		listedAfter int
		id          string
		want        string // "" admitted
	}{
		"started by its schedule":           {schedule: startedBy(made)},
		"listed among its recent runs only": {schedule: finished},
		"listed a moment after it started":  {schedule: startedBy(made), listedAfter: 3},
		"updated by kedge schedule":         {schedule: resealed},
		"a copy started by hand":            {schedule: notListing, want: "schedule nightly did not start this run: a copy of its action started by hand"},
		"its schedule deleted":              {want: "schedule nightly no longer exists: the action of a deleted schedule starts nothing"},
		"its schedule changed since":        {schedule: changed, want: "schedule nightly was made or changed at 2026-11-26T05:00:00Z, and its action was sealed at 2026-11-26T03:00:01Z: an action from before, or a schedule changed without the key; run `kedge schedule` again to seal it anew"},
		"its schedule made again":           {schedule: madeAgain, want: "schedule nightly was made or changed at 2026-11-26T06:00:00Z, and its action was sealed at 2026-11-26T03:00:01Z: an action from before, or a schedule changed without the key; run `kedge schedule` again to seal it anew"},
		"an action sealed before bindings":  {schedule: startedBy(made), id: "-", want: "its schedule action was sealed before Kedge bound actions to their schedule: run `kedge schedule` again to seal it anew"},
	} {
		t.Run(name, func(t *testing.T) {
			v := &visibility{started: made, listedAfter: c.listedAfter, schedules: map[string]*client.ScheduleDescription{}}
			if c.schedule != nil {
				v.schedules["nightly"] = c.schedule
			}
			in := workflows.AdmitRunInput{Runbook: "cert-renewal", Cluster: "lab", Scheduled: true, ScheduleID: "nightly", IssuedAt: made.Add(time.Second)}
			if c.id == "-" {
				in.ScheduleID = ""
			}
			res := admit(t, v, in)
			if c.want == "" && (!res.Admitted || res.Reason != "") {
				t.Errorf("refused: %+v", res)
			}
			if c.want != "" && (res.Admitted || res.Reason != c.want) {
				t.Errorf("%+v, want refused with %q", res, c.want)
			}
		})
	}
}
