package starter

import (
	"time"

	"github.com/urfave/cli/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"kedge.dev/kedge/workflows"
)

// rerunCommand starts a runbook again with an earlier run's input: what
// operators reach for a Temporal reset to do. Workers refuse reset runs
// (nothing in a reset proves a key holder asked for it); a rerun is a new
// run under a new ID, its input opened and sealed again by this key
// holder's client, with the original's params and inventory snapshot.
func rerunCommand() *cli.Command {
	return &cli.Command{
		Name:      "rerun",
		Usage:     "start a runbook again with the input of an earlier run (Kedge's answer to a Temporal reset, which workers refuse)",
		ArgsUsage: "WORKFLOW_ID",
		Flags: append([]cli.Flag{outputFlag,
			&cli.StringFlag{Name: "run-id", Usage: "the earlier run's `RUN_ID` (default: the latest run of WORKFLOW_ID)"},
			&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, Usage: "show live progress and exit non-zero if the runbook fails"},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("rerun takes one WORKFLOW_ID")
			}
			id := c.Args().First()
			opts, err := clientOptions(c)
			if err != nil {
				return err
			}
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			it := cl.GetWorkflowHistory(c.Context, id, c.String("run-id"), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			if !it.HasNext() {
				return failed("rerun %s: no history", id)
			}
			first, err := it.Next()
			if err != nil {
				return failed("rerun %s: %v", id, err)
			}
			start := first.GetWorkflowExecutionStartedEventAttributes()
			if start == nil {
				return failed("rerun %s: its history does not begin with a start", id)
			}
			dc := converter.WithDataConverterSerializationContext(opts.DataConverter,
				converter.WorkflowSerializationContext{Namespace: opts.Namespace, WorkflowID: id})
			var in workflows.RunbookInput
			if err := dc.FromPayloads(start.GetInput(), &in); err != nil {
				return failed("rerun %s: open its input: %v", id, err)
			}
			if in.Runbook.Name == "" {
				return failed("rerun %s: it is no runbook run (a %s workflow)", id, start.GetWorkflowType().GetName())
			}
			if p := in.Admission.Parent; p != nil {
				return failed("rerun %s: it was started by %s: rerun that one", id, p.WorkflowID)
			}
			newID := workflowID(in.Runbook.Name, in.Cluster.Name, time.Now())
			run, err := startRunbook(c, cl, newID, start.GetTaskQueue().GetName(), in)
			if err != nil {
				return err
			}
			return started(c, cl, run, id)
		},
	}
}
