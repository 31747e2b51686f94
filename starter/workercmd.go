package starter

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/internal/metrics"
	"kedge.dev/kedge/worker"
)

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run a worker: it executes runbooks from its task queue against the hosts it can reach",
		Description: "Workers are stateless: run as many as you like against one Temporal. A worker that reaches\n" +
			"only one site's hosts polls that site's queue (--task-queue, the inventory's taskQueue).",
		Flags: append(temporalFlags(),
			&cli.StringFlag{Name: "identity", Usage: "name of this worker in workflow histories (default pid@host)", EnvVars: []string{"KEDGE_WORKER_IDENTITY"}},
			&cli.StringFlag{Name: "metrics-listen", Usage: "`HOST:PORT` serving Prometheus /metrics and /healthz (default: none)", EnvVars: []string{"KEDGE_METRICS_LISTEN"}},
		),
		Action: func(c *cli.Context) error {
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelInfo}))
			var reg *metrics.Registry
			var ln net.Listener
			if addr := c.String("metrics-listen"); addr != "" {
				var err error
				if ln, err = net.Listen("tcp", addr); err != nil {
					return failed("--metrics-listen %s: %v", addr, err)
				}
				defer ln.Close()
				reg = metrics.New(log, metrics.DefaultInterval)
				defer reg.Close()
			}
			cl, err := dial(c, func(o *client.Options) {
				if reg != nil {
					o.MetricsHandler = reg.Handler()
				}
			})
			if err != nil {
				return err
			}
			defer cl.Close()
			w := worker.New(cl, worker.Options{TaskQueue: c.String("task-queue"), Identity: c.String("identity"), Logger: log})
			if err := w.Start(); err != nil {
				return failed("start worker: %v", err)
			}
			defer w.Stop()
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if reg != nil {
				go func() {
					if err := reg.Serve(ctx, ln, workerHealth(cl)); err != nil {
						log.Error("metrics endpoint stopped", "err", err)
					}
				}()
				fmt.Fprintf(c.App.ErrWriter, "kedge worker metrics on http://%s/metrics, health on /healthz\n", ln.Addr())
			}
			fmt.Fprintf(c.App.ErrWriter, "kedge worker polling task queue %s on %s (namespace %s)\n", c.String("task-queue"), c.String("address"), c.String("namespace"))
			<-ctx.Done()
			return nil
		},
	}
}

// workerHealth is healthy while the Temporal frontend the worker polls
// answers its health check.
func workerHealth(cl client.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := cl.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			return fmt.Errorf("temporal frontend unreachable: %w", err)
		}
		return nil
	}
}
