package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Admission says how a run came to be. It travels in the run's sealed
// input (the payload codec binds that input to the run's namespace and
// workflow ID), so a client without the codec key can neither forge it
// nor move it: a start it copies from another run's history under another
// workflow ID does not open, and one under the same ID is refused here.
type Admission struct {
	// IssuedAt is when a front door (CLI, chat, webhook) prepared the run:
	// a top-level run must start within AdmissionWindow of it.
	IssuedAt time.Time `json:"issuedAt,omitzero"`
	// Scheduled marks a schedule's action, sealed once when the schedule
	// was made and started by Temporal each time it fires.
	Scheduled bool `json:"scheduled,omitempty"`
	// Schedule is the ID of the schedule the action was sealed for: its
	// runs are admitted only while that schedule exists unchanged and
	// lists them as its own.
	Schedule string `json:"schedule,omitempty"`
	// Parent is the run that starts this one as its child.
	Parent *Execution `json:"parent,omitempty"`
}

// Execution names one run of a workflow.
type Execution struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
}

// AdmissionWindow is how far a top-level run's start may be from the time
// its input was sealed (clocks of operators' machines included).
const AdmissionWindow = 15 * time.Minute

// ScheduleSealWindow is how far a schedule's last change (its creation,
// or its last update) may be from the time its action was sealed:
// `kedge schedule` seals the action and sends it at once. Anything
// further is an action put back into the schedule later, by someone
// without the key; the schedule's runs are then refused until `kedge
// schedule` seals the action anew. It holds the operator's clock to
// within two minutes of the Temporal server's.
const ScheduleSealWindow = 2 * time.Minute

// AdmitRunActivity is the activity a top-level run asks first: is it the
// only run ever started under its workflow ID (the worker looks in
// Temporal)? A sealed input replayed under the ID of a run that ended is
// refused there.
const AdmitRunActivity = "kedge.admit-run"

// AdmitRunInput and AdmitRunResult are the admit activity's.
type AdmitRunInput struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	// Runbook and Cluster name the run's runbook and cluster, from its
	// sealed input: the worker refuses the run while an earlier run of the
	// runbook is open on the cluster (one run per cluster at a time, the
	// rule the front doors check before a start). Runs started before
	// these fields send none and are not checked.
	Runbook string `json:"runbook,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// Scheduled, ScheduleID and IssuedAt are the sealed input's
	// Admission: the worker admits a schedule's run only when that
	// schedule started it and was not changed since IssuedAt.
	Scheduled  bool      `json:"scheduled,omitempty"`
	ScheduleID string    `json:"scheduleId,omitempty"`
	IssuedAt   time.Time `json:"issuedAt,omitzero"`
}

// AdmitRunResult echoes the run it admitted: a sealed answer, bound to
// this run's activity, that no one without the key can make up.
type AdmitRunResult struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	Admitted   bool   `json:"admitted"`
	Reason     string `json:"reason,omitempty"`
}

// Admit stamps a run a front door is about to start.
func Admit(in RunbookInput, now time.Time) RunbookInput {
	in.Admission = Admission{IssuedAt: now.UTC()}
	return in
}

// AdmitScheduled stamps the input of the action of schedule id.
func AdmitScheduled(in RunbookInput, now time.Time, id string) RunbookInput {
	in.Admission = Admission{IssuedAt: now.UTC(), Scheduled: true, Schedule: id}
	return in
}

// admissionChange versions the admission checks: runs started before them
// carry no Admission and replay without the checks.
const admissionChange = "kedge-admission"

// ErrNotAdmitted is the error type of a run refused at its start.
const ErrNotAdmitted = "RunNotAdmitted"

// notAdmitted is a run's refusal. It keeps no cause, on purpose (cause
// dropped: the front doors show a failed run's innermost cause,
// runs.RootMessage, and that must be the refusal, not what it quotes):
// its message says why, with the text of any error behind it.
func notAdmitted(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError("run refused: "+fmt.Sprintf(format, args...), ErrNotAdmitted, nil)
}

// refuseReset stops a run that Temporal made by resetting another: its
// history replays the old run's, and what comes after would run again on
// the hosts. Nothing in a reset run's history proves a key holder asked
// for it, so Kedge re-runs through `kedge rerun` (a new run, sealed anew)
// and never through a reset. The panic fails the workflow task every time
// it is tried, before any command: the run stays open, doing nothing,
// until it is terminated.
func refuseReset(ctx workflow.Context) {
	info := workflow.GetInfo(ctx)
	if info.OriginalRunID != "" && info.OriginalRunID != info.WorkflowExecution.RunID {
		panic(fmt.Sprintf("kedge: run %s of %s was made by a Temporal reset of run %s: refused, nothing will run (terminate it; re-run with `kedge rerun %s`)",
			info.WorkflowExecution.RunID, info.WorkflowExecution.ID, info.OriginalRunID, info.WorkflowExecution.ID))
	}
}

// admitRunbook checks a runbook run before its first step: not reset, a
// runbook in the input, started by its sealed parent, or (at top level)
// started near the time its input was sealed and the only run of its ID.
func admitRunbook(ctx workflow.Context, in *RunbookInput) error {
	refuseReset(ctx)
	if workflow.GetVersion(ctx, admissionChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	if in.Runbook.Name == "" || len(in.Runbook.Steps) == 0 {
		return notAdmitted("its input holds no runbook")
	}
	info := workflow.GetInfo(ctx)
	adm := in.Admission
	if p := info.ParentWorkflowExecution; p != nil {
		if adm.Parent == nil || adm.Parent.WorkflowID != p.ID || adm.Parent.RunID != p.RunID {
			return notAdmitted("it was started by %s, not by the run its input was sealed for", p.ID)
		}
		return nil
	}
	if adm.Parent != nil {
		return notAdmitted("its input was sealed for a child of %s, and it was started on its own", adm.Parent.WorkflowID)
	}
	if !adm.Scheduled {
		if adm.IssuedAt.IsZero() {
			return notAdmitted("its input carries no admission")
		}
		if d := info.WorkflowStartTime.Sub(adm.IssuedAt); d > AdmissionWindow || d < -AdmissionWindow {
			return notAdmitted("its input was sealed at %s, %s from its start: an old input replayed, or a clock far off",
				adm.IssuedAt.Format(time.RFC3339), d.Round(time.Second))
		}
	}
	return admitOnce(ctx, in)
}

// admitOnce asks the worker whether another run under this workflow ID
// exists or an earlier run of the runbook is open on the cluster, and,
// for a schedule's run, whether its schedule started it.
func admitOnce(ctx workflow.Context, in *RunbookInput) error {
	info := workflow.GetInfo(ctx)
	// Retried while Temporal's visibility store does not answer (a
	// restarting database): only a definite answer refuses a run.
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: 10 * time.Second},
		Summary:                "admit this run (the only one under its ID; a schedule's, the only one of its runbook on its cluster)",
	})
	want := AdmitRunInput{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		Runbook: in.Runbook.Name, Cluster: in.Cluster.Name,
		Scheduled: in.Admission.Scheduled, ScheduleID: in.Admission.Schedule, IssuedAt: in.Admission.IssuedAt}
	var res AdmitRunResult
	if err := workflow.ExecuteActivity(actx, AdmitRunActivity, want).Get(ctx, &res); err != nil {
		return notAdmitted("could not check it is the only run of %s: %v", want.WorkflowID, err) // cause dropped: see notAdmitted
	}
	if res.WorkflowID != want.WorkflowID || res.RunID != want.RunID || !res.Admitted {
		reason := res.Reason
		if reason == "" {
			reason = "the admission answer was for another run"
		}
		return notAdmitted("%s", reason)
	}
	return nil
}

// admitTool checks a run of one of Kedge's own workflows that a front
// door starts beside runbooks (inspect, chat-follow): not reset, started
// within AdmissionWindow of when its input was sealed, and the only run
// under its ID. A copy of its input started again re-reads every host or
// posts to chat again: refused like a runbook's. change versions the
// check for each workflow: runs started before it replay without.
func admitTool(ctx workflow.Context, change string, issued time.Time) error {
	refuseReset(ctx)
	if workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	info := workflow.GetInfo(ctx)
	if info.ParentWorkflowExecution != nil {
		return notAdmitted("%s runs only on its own, not as the child of %s", info.WorkflowType.Name, info.ParentWorkflowExecution.ID)
	}
	if issued.IsZero() {
		return notAdmitted("its input carries no admission")
	}
	if d := info.WorkflowStartTime.Sub(issued); d > AdmissionWindow || d < -AdmissionWindow {
		return notAdmitted("its input was sealed at %s, %s from its start: an old input replayed, or a clock far off",
			issued.Format(time.RFC3339), d.Round(time.Second))
	}
	return admitOnce(ctx, &RunbookInput{})
}

// admitChild checks a rollout or compensation run: these are only ever
// started by a runbook (or a rollout), never on their own, and never empty.
func admitChild(ctx workflow.Context, kind string, empty bool) error {
	refuseReset(ctx)
	if workflow.GetVersion(ctx, admissionChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	if empty {
		return notAdmitted("its %s input is empty", kind)
	}
	if workflow.GetInfo(ctx).ParentWorkflowExecution == nil {
		return notAdmitted("a %s runs only as the child of a runbook", kind)
	}
	return nil
}

// childAdmission is the admission a run gives the children it starts.
func childAdmission(ctx workflow.Context) Admission {
	e := workflow.GetInfo(ctx).WorkflowExecution
	return Admission{Parent: &Execution{WorkflowID: e.ID, RunID: e.RunID}}
}
