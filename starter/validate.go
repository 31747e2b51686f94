package starter

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/plan"
	"kedge.dev/kedge/runbooks/source"
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
		Name:      "plan",
		Usage:     "show which step runs on which host, in what order, without running anything",
		ArgsUsage: "RUNBOOK",
		Flags:     []cli.Flag{inventoryFlag, setFlag, setFileFlag, pathFlag, outputFlag},
		Action: func(c *cli.Context) error {
			comp, err := compile(c)
			if err != nil {
				return err
			}
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, comp.plan)
			}
			plan.Write(c.App.Writer, comp.plan)
			return nil
		},
	}
}
