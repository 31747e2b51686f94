package starter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

func urlPathEscape(s string) string { return url.PathEscape(s) }

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "validate a runbook, then start it on Temporal",
		ArgsUsage: "RUNBOOK",
		Flags: append([]cli.Flag{inventoryFlag, setFlag, setFileFlag, pathFlag, outputFlag,
			&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, Usage: "show live progress and exit non-zero if the runbook fails"},
			&cli.StringFlag{Name: "id", Usage: "workflow `ID`, under RUNBOOK/CLUSTER/ (default RUNBOOK/CLUSTER/TIMESTAMP-RANDOM)"},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			comp, err := compile(c)
			if err != nil {
				return err
			}
			runbook, cluster := comp.Loaded.Runbook.Name, comp.Cluster.Name
			id := c.String("id")
			if id == "" {
				id = workflowID(runbook, cluster, time.Now())
			} else if prefix := workflows.RunPrefix(runbook, cluster); !strings.HasPrefix(id, prefix) || id == prefix {
				// Status, approvals, chat and the one-run rule find a
				// run's runbook and cluster in its ID.
				return usageError("--id %q must start with %s (then anything of yours)", id, prefix)
			}
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			run, err := startRunbook(c, cl, id, c.String("task-queue"), comp.Input())
			if err != nil {
				return err
			}
			return started(c, cl, run, "")
		},
	}
}

// started tells what was started (a rerun says of what) and, with
// --wait, follows it to its end.
func started(c *cli.Context, cl client.Client, run client.WorkflowRun, rerunOf string) error {
	link := workflowURL(c, run.GetID(), run.GetRunID())
	if jsonOutput(c) && !c.Bool("wait") {
		out := map[string]string{"workflowId": run.GetID(), "runId": run.GetRunID(), "url": link}
		if rerunOf != "" {
			out["rerunOf"] = rerunOf
		}
		return writeJSON(c.App.Writer, out)
	}
	if !jsonOutput(c) {
		if rerunOf != "" {
			fmt.Fprintf(c.App.Writer, "started %s (a rerun of %s)\n%s\n", run.GetID(), rerunOf, link)
		} else {
			fmt.Fprintf(c.App.Writer, "started %s\n%s\n", run.GetID(), link)
		}
	}
	if c.Bool("wait") {
		return follow(c, cl, run.GetID(), run.GetRunID())
	}
	return nil
}

// refuseBusy refuses a start while another run of the runbook holds the
// cluster (runs.Holders: one run of a runbook per cluster at a time), so
// the operator hears it now rather than from the run's admission.
func refuseBusy(c *cli.Context, cl client.Client, runbook, cluster string) error {
	open, err := runs.Holders(c.Context, cl, c.String("namespace"), runbook, cluster, nil)
	if err != nil {
		return failed("%v", err)
	}
	if len(open) > 0 {
		id := open[0].GetExecution().GetWorkflowId()
		return failed("%s already runs on %s: %s, started %s. One run of a runbook per cluster at a time: follow it (kedge watch %s) or cancel it (kedge cancel %s)",
			runbook, cluster, id, open[0].GetStartTime().AsTime().UTC().Format(time.RFC3339), id, id)
	}
	return nil
}

// workflowID is RUNBOOK/CLUSTER/20060102-150405-abcd: readable in the UI's
// list, unique, and sortable by start time.
func workflowID(runbook, cluster string, now time.Time) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return workflows.RunWorkflowID(runbook, cluster, now.UTC().Format("20060102-150405")+"-"+hex.EncodeToString(b))
}

func watchCommand() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "follow a runbook's progress until it ends",
		ArgsUsage: "WORKFLOW_ID",
		Flags:     append([]cli.Flag{outputFlag}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("watch takes one WORKFLOW_ID")
			}
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			return follow(c, cl, c.Args().First(), "")
		},
	}
}

// follow polls the progress query, showing every change (bars per step and
// per node in a terminal, else a line per change), until the workflow ends;
// it returns an exit error when the runbook did not succeed.
func follow(c *cli.Context, cl client.Client, id, runID string) error {
	done := make(chan error, 1)
	go func() {
		var res workflows.RunbookResult
		done <- waitResult(c.Context, cl, id, runID, c.App.ErrWriter, &res)
	}()
	o := opener(c)
	pr := newProgressView(c.App.Writer, !jsonOutput(c), id, func(child string) (workflows.Progress, error) {
		return runs.Progress(c.Context, cl, o, child, "")
	})
	defer pr.close()
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	var runErr error
	var last workflows.Progress
	expanded := map[string]bool{} // rollout steps whose final items are known
	for finished := false; !finished; {
		select {
		case runErr = <-done:
			finished = true
		case <-tick.C:
		case <-c.Context.Done():
			return c.Context.Err()
		}
		p, err := runs.Progress(c.Context, cl, o, id, runID)
		if err != nil && finished {
			// Its end is known; what it did is read once more, from a
			// worker that may be busy: never an exit without it.
			p, err = progressAgain(c.Context, cl, id, runID, err)
			if err != nil {
				return cli.Exit(fmt.Sprintf("kedge: %s ended (%s), but its progress could not be read: %v", id, endedAs(runErr), err), ExitFailed)
			}
		}
		if err != nil {
			continue // not started yet, or a worker is not polling
		}
		runs.ExpandRollouts(c.Context, cl, &p, expanded)
		pr.update(p)
		last = p
		if finished && jsonOutput(c) {
			if err := writeJSON(c.App.Writer, watchJSON(p)); err != nil {
				return err
			}
		}
	}
	pr.close() // the bars end above what follows
	if !jsonOutput(c) {
		writeOutputs(c.App.Writer, last)
	}
	if runErr != nil {
		if temporal.IsCanceledError(runErr) {
			return cli.Exit(fmt.Sprintf("kedge: %s was cancelled", id), ExitFailed)
		}
		return cli.Exit(fmt.Sprintf("kedge: %s failed: %v", id, runs.RootMessage(runErr)), ExitFailed)
	}
	if !jsonOutput(c) {
		fmt.Fprintf(c.App.Writer, "%s succeeded\n", id)
	}
	return nil
}

// writeOutputs prints a run's outputs, one per line, and those that
// could not be rendered with why.
func writeOutputs(w io.Writer, p workflows.Progress) {
	names := slices.Sorted(maps.Keys(p.Outputs))
	names = append(names, slices.Sorted(maps.Keys(p.OutputErrors))...)
	if len(names) == 0 {
		return
	}
	fmt.Fprintln(w, "outputs:")
	for _, name := range names {
		if v, ok := p.Outputs[name]; ok {
			fmt.Fprintf(w, "  %s: %s\n", name, expr.Stringify(v))
		} else {
			fmt.Fprintf(w, "  %s: (%s)\n", name, p.OutputErrors[name])
		}
	}
}

// busyReadFor bounds how long a run's progress is asked for again when a
// query went unanswered where the command cannot go on without it (an
// ended run's last view, a decision's pause): a query is answered by a
// worker (replaying a closed run's history), which a busy one may be
// slow to do.
var busyReadFor, busyReadEvery = time.Minute, time.Second

// progressAgain asks for a run's progress until a worker answers or
// busyReadFor passes (err is the first attempt's error). Only a timeout
// is asked again: a run that is not there, or a query refused, is told
// at once.
func progressAgain(ctx context.Context, cl client.Client, id, runID string, err error) (workflows.Progress, error) {
	deadline := time.Now().Add(busyReadFor)
	for time.Now().Before(deadline) && isTimeout(err) {
		select {
		case <-ctx.Done():
			return workflows.Progress{}, ctx.Err()
		case <-time.After(busyReadEvery):
		}
		var p workflows.Progress
		if p, err = runs.Progress(ctx, cl, runs.Opener{}, id, runID); err == nil {
			return p, nil
		}
	}
	return workflows.Progress{}, err
}

// endedAs says how a run ended, from its result's error.
func endedAs(runErr error) string {
	switch {
	case runErr == nil:
		return "succeeded"
	case temporal.IsCanceledError(runErr):
		return "cancelled"
	}
	return "failed: " + runs.RootMessage(runErr)
}

// isTimeout says whether a query went unanswered in time (the client's
// deadline, or the server's for a worker to answer).
func isTimeout(err error) bool {
	var dl *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &dl)
}
