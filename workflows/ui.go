package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"

	"kedge.dev/kedge/actions/errtype"
)

// What the Temporal Web UI shows of a run, and how it is kept readable:
//
//   - the workflow type is the runbook's name (TypeOf), so the list says
//     "kubelet-image-swap", not "runbook";
//   - search attributes KedgeCluster, KedgeRunbook, KedgeNode and
//     KedgeStatus (internal/searchattr) let the list filter; a workflow
//     started with KedgeCluster keeps KedgeStatus current and labels its
//     children and types them by their runbooks; one started without it
//     (a namespace without Kedge's attributes, a client that does not use
//     Describe) does none of that, so it never trips over an unknown
//     attribute and its children are typed RunbookWorkflow as before;
//   - static summary and details say what runs where; every activity has a
//     summary ("drain worker-2 (step drain)"); the current details list the
//     steps and their states.
//
// Summaries, details and the progress query carry step ids, action names,
// node and unit names, file paths and non-secret params: never a secret
// param, a file's content or a command line. They are payloads, sealed by
// the payload codec like every other; search attribute values are not
// (Temporal indexes them in plain text), so they hold names only.

// uiChange is the workflow.GetVersion change id of what changed the
// commands a workflow emits: KedgeStatus upserts, children's workflow types
// named after their runbooks. Runs begun before it replay without them.
const uiChange = "kedge-ui"

// reservedTypes are the workflow types registered by name: a runbook so
// named runs under RunbookWorkflow.
var reservedTypes = []string{RunbookWorkflow, RolloutWorkflow, CompensateWorkflow, FleetLockWorkflow}

// TypeOf is the workflow type a runbook runs as: its own name, so the Web
// UI reads like the runbook. Workers run every type they do not otherwise
// know as a runbook (Register). A name that clashes with one of Kedge's
// own types, or none, gives RunbookWorkflow.
func TypeOf(runbook string) string {
	for _, t := range reservedTypes {
		if runbook == t {
			return RunbookWorkflow
		}
	}
	if runbook == "" {
		return RunbookWorkflow
	}
	return runbook
}

// RunbookRunsQuery is the visibility query that selects runbook runs
// whatever their type: those typed RunbookWorkflow (started before types
// were runbook names, or by a client that does not use Describe) and those
// labelled KedgeRunbook; not rollouts or compensations, which are parts of
// a run. It needs Kedge's search attributes on the namespace.
func RunbookRunsQuery() string {
	return fmt.Sprintf("(WorkflowType = '%s' OR %s IS NOT NULL) AND WorkflowType NOT IN ('%s', '%s', '%s')",
		RunbookWorkflow, searchattr.Runbook, RolloutWorkflow, CompensateWorkflow, FleetLockWorkflow)
}

// IsRunbookRun says whether a workflow of type typeName, with the
// KedgeRunbook search attribute runbook ("" when it has none), runs a
// runbook (rather than a rollout, a compensation or something that is not
// Kedge's). Use it where `WorkflowType = 'runbook'` was the test.
func IsRunbookRun(typeName, runbook string) bool {
	switch typeName {
	case RunbookWorkflow:
		return true
	case RolloutWorkflow, CompensateWorkflow, FleetLockWorkflow:
		return false
	}
	return runbook != "" && TypeOf(runbook) == typeName
}

// StartMetadata is how a client starts a runbook so the Web UI reads it:
// the workflow type, the search attributes, a one-line summary and details.
type StartMetadata struct {
	WorkflowType     string
	SearchAttributes temporal.SearchAttributes
	StaticSummary    string
	StaticDetails    string
}

// Describe gives the start metadata of a runbook run.
func Describe(in RunbookInput) StartMetadata {
	return StartMetadata{
		WorkflowType:     TypeOf(in.Runbook.Name),
		SearchAttributes: temporal.NewSearchAttributes(labels(in.Cluster.Name, in.Runbook.Name, runNode(&in.Runbook, in.Params, &in.Cluster))...),
		StaticSummary:    fmt.Sprintf("%s on %s", in.Runbook.Name, in.Cluster.Name),
		StaticDetails:    staticDetails(in),
	}
}

// labels are the search attributes of a new run.
func labels(cluster, runbook, node string) []temporal.SearchAttributeUpdate {
	u := []temporal.SearchAttributeUpdate{
		searchattr.ClusterKey.ValueSet(cluster),
		searchattr.RunbookKey.ValueSet(runbook),
		searchattr.StatusKey.ValueSet(searchattr.StatusRunning),
	}
	if node != "" {
		u = append(u, searchattr.NodeKey.ValueSet(node))
	}
	return u
}

// runNode is the node a run works on when it names one: a param called
// node that holds an inventory node's name (node-join, node-remove, the
// per-node runbooks of a rollout).
func runNode(rb *runbooks.Runbook, params map[string]any, cluster *inventory.Cluster) string {
	for _, p := range rb.Params {
		if p.Name != "node" || p.Secret {
			continue
		}
		if name, ok := params["node"].(string); ok {
			if _, known := cluster.Node(name); known {
				return name
			}
		}
	}
	return ""
}

// staticDetails: the runbook, its description, its params (secret ones
// masked) and its steps in order.
func staticDetails(in RunbookInput) string {
	var b strings.Builder
	printf(&b, "**%s** on cluster **%s**\n", in.Runbook.Name, in.Cluster.Name)
	if d := strings.TrimSpace(in.Runbook.Description); d != "" {
		printf(&b, "\n%s\n", d)
	}
	if len(in.Runbook.Params) > 0 {
		b.WriteString("\n| param | value |\n|---|---|\n")
		for _, p := range in.Runbook.Params {
			v, ok := in.Params[p.Name]
			text := "—"
			switch {
			case p.Secret:
				text = "(secret)"
			case ok:
				text = "`" + clip(strings.ReplaceAll(fmt.Sprint(v), "|", "\\|"), 120) + "`"
			}
			printf(&b, "| %s | %s |\n", p.Name, text)
		}
	}
	b.WriteString("\nSteps:\n")
	for _, s := range in.Runbook.Steps {
		printf(&b, "- `%s` %s", s.ID, stepWhat(s))
		if len(s.Needs) > 0 {
			printf(&b, " (after %s)", strings.Join(s.Needs, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func stepWhat(s runbooks.Step) string {
	what := s.Action
	switch {
	case s.Rollout != nil:
		what = "rollout of runbook " + s.Runbook
	case s.Runbook != "":
		what = "runbook " + s.Runbook
	case s.Approval != nil:
		what = "approval"
	}
	if s.Name != "" {
		what = s.Name + " — " + what
	}
	return what
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// runbookByName runs a runbook started under its own name as the workflow
// type (TypeOf): the worker's dynamic workflow.
func runbookByName(ctx workflow.Context, args converter.EncodedValues) (RunbookResult, error) {
	var in RunbookInput
	if err := args.Get(&in); err != nil || len(in.Runbook.Steps) == 0 {
		return RunbookResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("workflow type %s is not a Kedge runbook: its input is no runbook", workflow.GetInfo(ctx).WorkflowType.Name), errtype.InvalidInput, err)
	}
	return Runbook(ctx, in)
}

// ui is what a workflow keeps to show itself in the Web UI.
type ui struct {
	version workflow.Version
	indexed bool   // started with Kedge's search attributes: keep KedgeStatus, label children
	status  string // the KedgeStatus last set
}

func newUI(ctx workflow.Context) ui {
	u := ui{version: workflow.GetVersion(ctx, uiChange, workflow.DefaultVersion, 1)}
	if u.version < 1 {
		return u
	}
	sa := workflow.GetTypedSearchAttributes(ctx)
	_, u.indexed = sa.GetKeyword(searchattr.ClusterKey)
	u.status, _ = sa.GetKeyword(searchattr.StatusKey)
	return u
}

// setStatus upserts KedgeStatus when it changed.
func (u *ui) setStatus(ctx workflow.Context, status string) {
	if !u.indexed || status == u.status {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, searchattr.StatusKey.ValueSet(status)); err != nil {
		workflow.GetLogger(ctx).Warn("cannot set KedgeStatus", "status", status, "error", err)
		return
	}
	u.status = status
}

// childType is the workflow type of a child runbook: its name when this
// run is labelled (the child will be too, so IsRunbookRun knows it), else
// RunbookWorkflow, as before.
func (u *ui) childType(runbook string) string {
	if !u.indexed {
		return RunbookWorkflow
	}
	return TypeOf(runbook)
}

// childLabels are a child's search attributes, when this run has them.
func (u *ui) childLabels(cluster, runbook, node string) temporal.SearchAttributes {
	if !u.indexed {
		return temporal.SearchAttributes{}
	}
	return temporal.NewSearchAttributes(labels(cluster, runbook, node)...)
}

// kedgeStatus maps a run's state onto KedgeStatus.
func kedgeStatus(state string, waiting bool) string {
	switch state {
	case StateSucceeded:
		return searchattr.StatusSucceeded
	case StateFailed:
		return searchattr.StatusFailed
	case StateCancelled:
		return searchattr.StatusCancelled
	}
	if waiting {
		return searchattr.StatusWaitingApproval
	}
	return searchattr.StatusRunning
}

// updateDetails sets the run's current details (a line per step, with its
// state) and KedgeStatus.
func (r *run) updateDetails(ctx workflow.Context) {
	v := r.view()
	workflow.SetCurrentDetails(ctx, currentDetails(v, r.rb.Name, r.in.Cluster.Name))
	r.ui.setStatus(ctx, kedgeStatus(v.State, v.Waiting > 0))
}

// view is the run's progress as the front ends show it. The workflow
// knows which runbook each child step runs.
func (r *run) view() View {
	names := map[string]string{}
	for _, s := range r.steps {
		if s.spec.Runbook != "" {
			names[s.spec.ID] = s.spec.Runbook
		}
	}
	return NewView(r.snapshot(), ViewOptions{Runbooks: names})
}

// currentDetails is the Web UI's view of a run: its summary, then a line
// per step with its mark, state, what it does and how far it got.
func currentDetails(v View, runbook, cluster string) string {
	var b strings.Builder
	printf(&b, "**%s** on %s: %s\n\n", runbook, cluster, v.Summary)
	for _, row := range v.Rows {
		if row.Depth > 0 {
			continue
		}
		printf(&b, "- %s `%s` %s — %s", row.Mark, row.Step, row.State, row.What)
		if row.PartsText != "" {
			printf(&b, " on %s", row.PartsText)
		}
		if row.Attempts > 1 {
			printf(&b, ", attempt %d", row.Attempts)
		}
		if row.WaitingForApproval {
			printf(&b, ": `kedge approve %s --step %s`", v.WorkflowID, row.Step)
		}
		if row.Error != "" {
			printf(&b, ": %s", clip(row.Error, 200))
		}
		if row.Decided != "" {
			printf(&b, " (%s)", row.Decided)
		}
		if row.Undo != "" {
			printf(&b, " (undo %s)", row.Undo)
		}
		b.WriteString("\n")
	}
	if v.Error != "" {
		printf(&b, "\n%s\n", clip(v.Error, 400))
	}
	return b.String()
}

// printf appends to b. (fmt.Fprintf would do, but workflowcheck takes
// every writer for I/O.)
func printf(b *strings.Builder, format string, args ...any) {
	b.WriteString(fmt.Sprintf(format, args...))
}

// activitySummary is what the Web UI's timeline shows for one activity:
// the action's summary (see actions.Action.Summarize) and the step it
// belongs to.
func activitySummary(step string, action actions.Action, host string, input map[string]any) string {
	return clip(action.Summarize(host, input), 160) + " (step " + step + ")"
}
