package starter

import "github.com/urfave/cli/v2"

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run a Temporal server, its Web UI and a worker in this process (state kept in --data-dir)",
		Action: func(c *cli.Context) error {
			return failed("dev: not wired yet")
		},
	}
}
