package starter

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list runbook runs, newest first",
		Flags: append([]cli.Flag{outputFlag,
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "at most `N` runs"},
			&cli.StringFlag{Name: "cluster", Usage: "only runs on `CLUSTER` (KedgeCluster)"},
			&cli.StringFlag{Name: "runbook", Usage: "only runs of `RUNBOOK` (KedgeRunbook)"},
			&cli.StringFlag{Name: "node", Usage: "only runs working on `NODE` (KedgeNode)"},
			&cli.StringFlag{Name: "status", Usage: "only runs in `STATUS` (KedgeStatus): running, waiting-approval, paused, succeeded, failed, cancelled"},
			&cli.StringFlag{Name: "query", Usage: "extra visibility `QUERY`, e.g. \"ExecutionStatus='Running'\""},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			filters := listFilters(c)
			rows, err := listRuns(c, cl, runsQuery(filters, c.String("query")))
			if searchattr.IsMissing(err) && len(filters) == 0 {
				// A namespace without Kedge's attributes only holds runs
				// started as "runbook".
				fmt.Fprintf(c.App.ErrWriter, "kedge: namespace %s lacks Kedge's search attributes; run `kedge setup` to filter by cluster, runbook, node and status\n", c.String("namespace"))
				rows, err = listRuns(c, cl, legacyRunsQuery(c.String("query")))
			}
			if searchattr.IsMissing(err) {
				return missingAttributes(c, err)
			}
			if err != nil {
				return failed("list: %v", err)
			}
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, rows)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKFLOW ID\tRUNBOOK\tSTATUS\tSTARTED")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.WorkflowID, r.Runbook, r.KedgeStatus, r.Started.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
}

// runRow is one run in `kedge list`.
type runRow struct {
	WorkflowID   string     `json:"workflowId"`
	RunID        string     `json:"runId"`
	WorkflowType string     `json:"workflowType"`
	Status       string     `json:"status"` // Temporal's execution status
	Runbook      string     `json:"runbook,omitempty"`
	Cluster      string     `json:"cluster,omitempty"`
	Node         string     `json:"node,omitempty"`
	KedgeStatus  string     `json:"kedgeStatus,omitempty"` // the workflow's own account (waiting-approval, paused, ...)
	Started      time.Time  `json:"started"`
	Closed       *time.Time `json:"closed,omitempty"`
	URL          string     `json:"url"`
}

// listFilters are the conditions the filter flags ask for.
func listFilters(c *cli.Context) []string {
	var conds []string
	for _, f := range []struct{ flag, attr string }{
		{"cluster", searchattr.Cluster}, {"runbook", searchattr.Runbook}, {"node", searchattr.Node}, {"status", searchattr.Status},
	} {
		if v := c.String(f.flag); v != "" {
			conds = append(conds, fmt.Sprintf("%s = '%s'", f.attr, strings.ReplaceAll(v, "'", "")))
		}
	}
	return conds
}

// runsQuery selects runbook runs (workflows.RunbookRunsQuery), filtered.
func runsQuery(filters []string, extra string) string {
	q := workflows.RunbookRunsQuery()
	for _, f := range filters {
		q += " AND " + f
	}
	if extra != "" {
		q += " AND (" + extra + ")"
	}
	return q
}

func legacyRunsQuery(extra string) string {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.RunbookWorkflow)
	if extra != "" {
		q += " AND (" + extra + ")"
	}
	return q
}

func listRuns(c *cli.Context, cl client.Client, q string) ([]runRow, error) {
	rows := []runRow{}
	var token []byte
	for len(rows) < c.Int("limit") {
		resp, err := cl.ListWorkflow(c.Context, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.String("namespace"), Query: q, NextPageToken: token, PageSize: int32(c.Int("limit")),
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Executions {
			r := runRow{WorkflowID: e.Execution.WorkflowId, RunID: e.Execution.RunId, WorkflowType: e.GetType().GetName(), Started: e.StartTime.AsTime(),
				Status: strings.ToLower(strings.TrimPrefix(e.Status.String(), "WORKFLOW_EXECUTION_STATUS_"))}
			if e.CloseTime != nil {
				t := e.CloseTime.AsTime()
				r.Closed = &t
			}
			fields := e.GetSearchAttributes().GetIndexedFields()
			keyword := func(name string) string {
				var v string
				if p, ok := fields[name]; ok {
					_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
				}
				return v
			}
			r.Runbook, r.Cluster, r.Node, r.KedgeStatus = keyword(searchattr.Runbook), keyword(searchattr.Cluster), keyword(searchattr.Node), keyword(searchattr.Status)
			if r.Runbook == "" {
				r.Runbook = r.WorkflowType
			}
			switch r.KedgeStatus {
			case "", searchattr.StatusRunning, searchattr.StatusWaitingApproval, searchattr.StatusPaused:
				if r.Closed != nil || r.KedgeStatus == "" {
					r.KedgeStatus = r.Status // ended without saying so (terminated, timed out), or unlabelled
				}
			}
			r.URL = workflowURL(c, r.WorkflowID, r.RunID)
			rows = append(rows, r)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	if len(rows) > c.Int("limit") {
		rows = rows[:c.Int("limit")]
	}
	return rows, nil
}

func cancelCommand() *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "cancel a runbook: running steps are cancelled, completed steps undone",
		ArgsUsage: "WORKFLOW_ID",
		Flags:     temporalFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("cancel takes one WORKFLOW_ID")
			}
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := cl.CancelWorkflow(c.Context, c.Args().First(), ""); err != nil {
				return failed("cancel %s: %v", c.Args().First(), err)
			}
			fmt.Fprintf(c.App.Writer, "cancellation requested for %s (running steps stop, completed steps are undone)\n", c.Args().First())
			return nil
		},
	}
}

func approveCommand() *cli.Command {
	return &cli.Command{
		Name:  "approve",
		Usage: "decide at an approval step or a paused rollout, in the run or any of its child runbooks",
		Description: "WORKFLOW_ID is the run a person started (or any workflow under it). The decision goes to\n" +
			"the approval step waiting anywhere under it (name it with --step when several wait), or with\n" +
			"continue/abort to the rollout paused at its failure budget or by its alert gate.",
		ArgsUsage: "WORKFLOW_ID",
		Flags: append([]cli.Flag{outputFlag,
			&cli.StringFlag{Name: "step", Usage: "the approval step `ID` (default: the only one waiting)"},
			&cli.StringFlag{Name: "decision", Value: workflows.DecisionApprove, Usage: "approve or reject (an approval step); continue or abort (a rollout paused at its failure budget or by its alert gate: continue holds it again until the alerts clear), or restore where the runbook has restore steps (abort, then they run); release (--step NODE: free the FleetLock slot of a node whose drain failed or that is not back)"},
			&cli.StringFlag{Name: "comment", Usage: "why"},
			&cli.StringFlag{Name: "by", Usage: "who decides (default: the current user)"},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("approve takes one WORKFLOW_ID")
			}
			id, decision := c.Args().First(), c.String("decision")
			switch decision {
			case workflows.DecisionApprove, workflows.DecisionContinue, workflows.DecisionReject, workflows.DecisionAbort, workflows.DecisionRestore:
			case workflows.FleetLockDecisionRelease:
				if c.String("step") == "" {
					return usageError("--decision release frees a node's FleetLock slot: name the node with --step")
				}
			default:
				return usageError("--decision must be approve, reject, continue, abort, restore or release, got %q", decision)
			}
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			p, err := runs.Progress(c.Context, cl, opener(c), id, "")
			if err != nil {
				p, err = progressAgain(c.Context, cl, id, "", err)
			}
			if err != nil {
				return failed("query %s: %v", id, err)
			}
			pause, err := choosePause(id, runs.FindPauses(c.Context, cl, p, id), decision, c.String("step"))
			if err != nil {
				return err
			}
			by := c.String("by")
			if by == "" {
				by = currentUser()
			}
			d, err := runs.DecideAs(c.Context, cl, pause, decision, by, c.String("comment"), "")
			if err != nil {
				return failed("%s %s: %v", decision, pause.Target, runs.RootMessage(err))
			}
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, d)
			}
			switch pause.Kind {
			case runs.PauseRollout:
				fmt.Fprintf(c.App.Writer, "%s: rollout told to %s by %s\n", pause.Target, d.Decision, d.By)
				return nil
			case runs.PauseFleetLock:
				fmt.Fprintf(c.App.Writer, "%s: %s's slot released by %s\n", pause.Target, d.Step, d.By)
				return nil
			}
			fmt.Fprintf(c.App.Writer, "%s: step %s %sd by %s\n", pause.Target, d.Step, d.Decision, d.By)
			return nil
		},
	}
}

// choosePause picks, among the pauses found under the run id, the one a
// decision is for: an approval step (the only one waiting, or the one
// named step) for approve/reject, a paused rollout for continue/abort/restore. A
// run that is itself a rollout, or that waits on nothing, gets the
// decision sent to it as it is, and the workflow says why it refuses.
func choosePause(id string, pauses []runs.Pause, decision, step string) (runs.Pause, error) {
	kind := runs.PauseApproval
	switch decision {
	case workflows.DecisionContinue, workflows.DecisionAbort, workflows.DecisionRestore:
		kind = runs.PauseRollout
	case workflows.FleetLockDecisionRelease:
		return runs.Pause{Kind: runs.PauseFleetLock, Target: id, Step: step}, nil
	}
	var cands []runs.Pause
	for _, pa := range pauses {
		if pa.Kind == kind && (step == "" || kind == runs.PauseRollout || pa.Step == step) {
			cands = append(cands, pa)
		}
	}
	switch {
	case len(cands) == 1:
		return cands[0], nil
	case len(cands) == 0:
		return runs.Pause{Kind: kind, Target: id, Step: step}, nil
	}
	var where []string
	for _, pa := range cands {
		where = append(where, pa.Step+" (in "+pa.Target+")")
	}
	if kind == runs.PauseRollout {
		return runs.Pause{}, usageError("%s has %d rollouts paused (%s): name one as WORKFLOW_ID", id, len(cands), strings.Join(where, ", "))
	}
	return runs.Pause{}, usageError("%s has %d steps waiting for approval (%s): name one with --step, or name its workflow as WORKFLOW_ID", id, len(cands), strings.Join(where, ", "))
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		host, _ := os.Hostname()
		return u.Username + "@" + host
	}
	return "unknown"
}

func actionsCommand() *cli.Command {
	return &cli.Command{
		Name:  "actions",
		Usage: "list the actions runbook steps can use, with their inputs",
		Flags: []cli.Flag{outputFlag},
		Action: func(c *cli.Context) error {
			all := actions.All()
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, all)
			}
			for _, a := range all {
				fmt.Fprintf(c.App.Writer, "%s — %s\n", a.Name, a.Doc)
				switch a.Target {
				case actions.TargetHost:
					fmt.Fprintln(c.App.Writer, "  runs on: the hosts named by the step's on: (over SSH)")
				case actions.TargetNode:
					fmt.Fprintln(c.App.Writer, "  acts on: the nodes named by the step's on: (through the Kubernetes API)")
				case actions.TargetCluster:
					fmt.Fprintln(c.App.Writer, "  acts on: the cluster's API server (the inventory's kubernetes section)")
				}
				for _, in := range a.Inputs {
					req := ""
					if in.Required {
						req = " (required)"
					}
					fmt.Fprintf(c.App.Writer, "  %-16s %-9s %s%s\n", in.Name, in.Type, in.Doc, req)
				}
				fmt.Fprintf(c.App.Writer, "  outputs: %s\n\n", strings.Join(a.Outputs, ", "))
			}
			return nil
		},
	}
}
