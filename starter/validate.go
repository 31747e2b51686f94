package starter

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/plan"
	"kedge.dev/kedge/runbooks/source"
	"kedge.dev/kedge/runs"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check runbooks (and an inventory) without starting anything",
		ArgsUsage: "RUNBOOK...",
		Flags:     []cli.Flag{inventoryFlag, pathFlag, outputFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 && c.String("inventory") == "" {
				return usageError("validate needs RUNBOOK files or --inventory FILE")
			}
			var problems source.Errors
			collect := func(file string, err error) {
				var list source.Errors
				if errors.As(err, &list) {
					problems = append(problems, list...)
				} else if err != nil {
					problems = append(problems, source.Error{Pos: source.Pos{File: file}, Msg: err.Error()})
				}
			}
			var cluster *inventory.Cluster
			if p := c.String("inventory"); p != "" {
				var err error
				cluster, err = inventory.LoadFile(p)
				collect(p, err)
			}
			lib := library(c)
			for _, f := range c.Args().Slice() {
				_, err := lib.LoadFile(f, cluster)
				collect(f, err)
			}
			if jsonOutput(c) {
				if problems == nil {
					problems = source.Errors{}
				}
				if err := writeJSON(c.App.Writer, map[string]any{"valid": len(problems) == 0, "errors": problems}); err != nil {
					return err
				}
			} else {
				for _, p := range problems {
					fmt.Fprintln(c.App.Writer, p.Error())
				}
			}
			if len(problems) > 0 {
				return cli.Exit("", ExitFailed)
			}
			return nil
		},
	}
}

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "show which step runs on which host, in what order, without running anything; with --live, also what a run would change",
		Description: "With --live, the steps the runbook's preview gate needs (they only read: hosts, the API, etcd) run on\n" +
			"Temporal, and the gate's prompt is printed: what a run would change (cluster-upgrade: every\n" +
			"manifest's diff). Nothing after the gate runs.",
		ArgsUsage: "RUNBOOK",
		Flags: append([]cli.Flag{inventoryFlag, setFlag, setFileFlag, pathFlag, outputFlag,
			&cli.BoolFlag{Name: "live", Usage: "run what the runbook's preview gate needs (reads only) and print its prompt: what a run would change"},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			comp, err := compile(c)
			if err != nil {
				return err
			}
			if c.Bool("live") {
				return livePlan(c, comp)
			}
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, comp.Plan)
			}
			plan.Write(c.App.Writer, comp.Plan)
			return nil
		},
	}
}

// livePlan runs the runbook as a preview: only what its preview gate
// needs, then the gate's prompt, rendered from what those steps read.
func livePlan(c *cli.Context, comp *runs.Prepared) error {
	rb := comp.Loaded.Runbook
	gate := rb.PreviewGate()
	if gate < 0 {
		return usageError("%s has no preview gate (an approval with preview: true): `kedge plan` without --live shows its steps", rb.Name)
	}
	if !jsonOutput(c) {
		plan.Write(c.App.Writer, comp.Plan)
		fmt.Fprintln(c.App.Writer)
	}
	cl, err := dial(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	in := comp.Input()
	in.Preview = true
	id := workflowID(rb.Name, comp.Cluster.Name, time.Now())
	run, err := startRunbook(c, cl, id, c.String("task-queue"), in)
	if err != nil {
		return err
	}
	if !jsonOutput(c) {
		fmt.Fprintf(c.App.Writer, "previewing %s: the steps before %s, which only read\n%s\n", id, rb.Steps[gate].ID, workflowURL(c, id, run.GetRunID()))
	}
	if err := follow(c, cl, id, run.GetRunID()); err != nil || jsonOutput(c) {
		return err
	}
	p, err := runs.Progress(c.Context, cl, runs.Opener{}, id, run.GetRunID())
	if err != nil {
		if p, err = progressAgain(c.Context, cl, id, run.GetRunID(), err); err != nil {
			return failed("%s ended, but its progress could not be read: %v", id, err)
		}
	}
	for _, s := range p.Steps {
		if s.ID == rb.Steps[gate].ID {
			fmt.Fprintf(c.App.Writer, "\nWhat a run would do (%s's prompt; nothing has changed):\n%s\n", s.ID, s.Prompt)
		}
	}
	return nil
}
