package starter

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"kedge.dev/kedge/worker"
)

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run a worker: it executes runbooks from its task queue against the hosts it can reach",
		Flags: temporalFlags(),
		Action: func(c *cli.Context) error {
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelInfo}))
			w := worker.New(cl, worker.Options{TaskQueue: c.String("task-queue"), Logger: log})
			if err := w.Start(); err != nil {
				return failed("start worker: %v", err)
			}
			defer w.Stop()
			fmt.Fprintf(c.App.ErrWriter, "kedge worker polling task queue %s on %s (namespace %s)\n", c.String("task-queue"), c.String("address"), c.String("namespace"))
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			select {
			case <-sig:
			case <-c.Context.Done():
			}
			return nil
		},
	}
}
