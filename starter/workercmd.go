package starter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"kedge.dev/kedge/chatops"
	"kedge.dev/kedge/internal/metrics"
	"kedge.dev/kedge/worker"
	"kedge.dev/kedge/worker/trust"
)

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run a worker: it executes runbooks from its task queue against the hosts it can reach",
		Description: "Workers are stateless: run as many as you like against one Temporal. A worker that reaches\n" +
			"only one site's hosts polls that site's queue (--task-queue, the inventory's taskQueue).",
		Flags: append(temporalFlags(),
			&cli.StringFlag{Name: "identity", Usage: "name of this worker in workflow histories (default pid@host)", EnvVars: []string{"KEDGE_WORKER_IDENTITY"}},
			clustersFlag(),
			&cli.StringSliceFlag{Name: "chat-response-url", Usage: "`URL` prefix a chat-started run's progress may be posted to, repeatable (default: Slack's, https://hooks.slack.com/)", EnvVars: []string{"KEDGE_CHAT_RESPONSE_URLS"}},
			acceptUnboundFlag,
			&cli.StringFlag{Name: "metrics-listen", Usage: "`HOST:PORT` serving Prometheus /metrics and /healthz (default: none)", EnvVars: []string{"KEDGE_METRICS_LISTEN"}},
		),
		Action: func(c *cli.Context) error {
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelInfo}))
			clusters, err := loadClusters("kedge worker", c.StringSlice("clusters"), c.App.ErrWriter)
			if err != nil {
				return err
			}
			responseURLs, err := chatops.ResponseURLCheck(c.StringSlice("chat-response-url"))
			if err != nil {
				return usageError("--chat-response-url: %v", err)
			}
			var reg *metrics.Registry
			var ln net.Listener
			if addr := c.String("metrics-listen"); addr != "" {
				if ln, err = net.Listen("tcp", addr); err != nil {
					return failed("--metrics-listen %s: %v", addr, err)
				}
				defer ln.Close()
				reg = metrics.New(log, metrics.DefaultInterval)
				defer reg.Close()
			}
			sealKeys, err := loadCodec(codecKeyPath(c)) // etcd snapshots are sealed with the payloads' key
			if err != nil {
				return err
			}
			// A site's key file (one queue's keys): that queue's activities
			// only, never a workflow.
			if q := sealKeys.Queue(); q != "" && q != c.String("task-queue") {
				return usageError("--codec-key holds task queue %s's keys only: run this worker with --task-queue %s (or give it the full key file)", q, q)
			}
			var dc converter.DataConverter
			cl, err := dial(c, func(o *client.Options) {
				if reg != nil {
					o.MetricsHandler = reg.Handler()
				}
				dc = o.DataConverter
			})
			if err != nil {
				return err
			}
			defer cl.Close()
			w := worker.New(cl, worker.Options{TaskQueue: c.String("task-queue"), Identity: c.String("identity"), Logger: log, Clusters: clusters,
				ResponseURLAllowed: responseURLs, DataConverter: dc, SealKeys: sealKeys, ActivitiesOnly: sealKeys.Queue() != ""})
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
			what := "task queue"
			if sealKeys.Queue() != "" {
				what = "the activities of task queue" // a site's key: no workflow
			}
			fmt.Fprintf(c.App.ErrWriter, "kedge worker polling %s %s on %s (namespace %s)\n", what, c.String("task-queue"), c.String("address"), c.String("namespace"))
			<-ctx.Done()
			return nil
		},
	}
}

// clustersFlag names the inventories a worker serves.
func clustersFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "clusters", Usage: "inventory `FILE|DIR` of a cluster this worker serves (a directory: its *.yaml files), repeatable: " +
		"hosts, SSH keys, known_hosts, Vault and kubeconfigs come from these files only; a run naming anything else is refused", EnvVars: []string{"KEDGE_CLUSTERS"}}
}

// loadClusters reads the inventories a worker serves and says which
// clusters they are.
func loadClusters(who string, paths []string, out io.Writer) (*trust.Files, error) {
	if len(paths) == 0 {
		return nil, usageError("--clusters is required: the inventories of the clusters this worker serves (files, or directories of *.yaml)")
	}
	f, err := trust.Load(paths)
	if err != nil {
		return nil, failed("--clusters: %v", err)
	}
	cs, _ := f.Clusters()
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		names = []string{"none yet"}
	}
	fmt.Fprintf(out, "%s: the worker serves clusters %s (inventories in %s)\n", who, strings.Join(names, ", "), strings.Join(paths, ", "))
	return f, nil
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

// acceptUnboundFlag lets a worker open payloads sealed by a Kedge that did
// not bind them to their run: for the runs in flight across an upgrade
// only, since such payloads can be copied into other runs.
var acceptUnboundFlag = &cli.BoolFlag{
	Name:    "accept-unbound-payloads",
	Usage:   "also open payloads sealed before payloads were bound to their run (only while runs started before an upgrade finish: such payloads can be replayed into other runs)",
	EnvVars: []string{"KEDGE_ACCEPT_UNBOUND_PAYLOADS"},
}
