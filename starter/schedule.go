package starter

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/workflows"
)

func scheduleCommand() *cli.Command {
	return &cli.Command{
		Name:      "schedule",
		Usage:     "run a runbook on a Temporal Schedule (e.g. cert-renewal every 24h); running it again updates the schedule",
		ArgsUsage: "RUNBOOK",
		Flags: append([]cli.Flag{inventoryFlag, setFlag, setFileFlag, pathFlag, outputFlag,
			&cli.DurationFlag{Name: "every", Usage: "interval between runs, e.g. 24h", Required: true},
			&cli.StringFlag{Name: "id", Usage: "schedule `ID` (default RUNBOOK/CLUSTER)"},
			&cli.BoolFlag{Name: "paused", Usage: "create the schedule paused"},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			every := c.Duration("every")
			if every < time.Minute {
				return usageError("--every must be at least 1m, got %s", every)
			}
			comp, err := compile(c)
			if err != nil {
				return err
			}
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			id := c.String("id")
			if id == "" {
				id = comp.Loaded.Runbook.Name + "/" + comp.Cluster.Name
			}
			spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
			in := workflows.AdmitScheduled(comp.Input(), time.Now(), id)
			md := workflows.Describe(in)
			// Temporal names each run ID-TIME: under RUNBOOK/CLUSTER/,
			// like every run, where chat and the busy check look.
			actionID := workflows.ScheduledWorkflowID(comp.Loaded.Runbook.Name, comp.Cluster.Name)
			// The input is sealed for this schedule's runs alone: it opens
			// under actionID and a time, and its runs are admitted while
			// this schedule exists unchanged and lists them.
			cd, err := loadCodec(codecKeyPath(c))
			if err != nil {
				return err
			}
			sealed, err := cd.SealScheduleAction(c.String("namespace"), id, actionID, in)
			if err != nil {
				return failed("seal the schedule's action: %v", err)
			}
			action := &client.ScheduleWorkflowAction{
				ID: actionID, Workflow: md.WorkflowType, Args: []any{sealed},
				TaskQueue:             c.String("task-queue"),
				StaticSummary:         fmt.Sprintf("%s, every %s", md.StaticSummary, every),
				StaticDetails:         md.StaticDetails,
				TypedSearchAttributes: md.SearchAttributes,
			}
			sc := cl.ScheduleClient()
			verb := "created"
			_, err = sc.Create(c.Context, client.ScheduleOptions{ID: id, Spec: spec, Action: action, Paused: c.Bool("paused"),
				Note: "kedge schedule " + comp.Loaded.Runbook.Name})
			var exists *serviceerror.AlreadyExists
			if errors.As(err, &exists) || errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
				verb = "updated"
				err = sc.GetHandle(c.Context, id).Update(c.Context, client.ScheduleUpdateOptions{
					DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
						s := in.Description.Schedule
						s.Spec, s.Action = &spec, action
						return &client.ScheduleUpdate{Schedule: &s}, nil
					},
				})
			}
			if searchattr.IsMissing(err) {
				return missingAttributes(c, err)
			}
			if err != nil {
				return failed("schedule %s: %v", id, err)
			}
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, map[string]string{"scheduleId": id, "every": every.String(), "result": verb})
			}
			fmt.Fprintf(c.App.Writer, "schedule %s %s: %s on %s every %s\n", id, verb, comp.Loaded.Runbook.Name, comp.Cluster.Name, every)
			return nil
		},
	}
}
