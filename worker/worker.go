package worker

import (
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/activities/chat"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/internal/attempt"
	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/resume"
	"kedge.dev/kedge/worker/trust"
	"kedge.dev/kedge/workflows"
)

// Options configure a worker.
type Options struct {
	// TaskQueue is the queue polled for workflows and activities: a
	// site's queue (the inventory's taskQueue) for a worker that reaches
	// only that site's hosts.
	TaskQueue string
	// Identity names the worker in workflow histories (who ran each
	// activity); the SDK's pid@host by default.
	Identity string
	Logger   *slog.Logger
	// SSH tunes the connection pool.
	SSH sshpool.Options
	// HeartbeatInterval is how often long host actions heartbeat.
	HeartbeatInterval time.Duration
	// Clusters are the inventories of the clusters this worker serves:
	// where it may connect and with what. An action naming a host, a
	// Vault or a kubeconfig they do not give is refused (nil: every such
	// action is).
	Clusters trust.Registry
	// ResponseURLAllowed says where chat.follow may post a chat-started
	// run's progress (nil: Slack's response URLs only).
	ResponseURLAllowed func(string) bool
	// DataConverter is the client's (with the payload codec): it opens
	// the heartbeat details a lost attempt hands to the next one
	// (internal/resume). Nil: Temporal's default, which opens no sealed
	// payload, so with the codec such an attempt starts over.
	DataConverter converter.DataConverter
	// SealKeys are the codec's keys (the client's --codec-key): what
	// leaves the worker for storage off the hosts (etcd snapshots) is
	// sealed with them. Nil: etcd.snapshot refuses.
	SealKeys *codec.Codec
	// ActivitiesOnly runs no workflow: a site's worker, holding its
	// queue's keys alone (codec.Codec.Queue), runs its queue's activities.
	ActivitiesOnly bool
}

// Worker is a Temporal worker with Kedge's workflows and activities.
type Worker struct {
	sdkworker.Worker
	pool *sshpool.Pool
}

// New builds a worker on c. Call Start or Run, then Stop.
func New(c client.Client, opts Options) *Worker {
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.DefaultTaskQueue
	}
	if opts.SSH.Logger == nil {
		opts.SSH.Logger = opts.Logger
	}
	w := sdkworker.New(c, opts.TaskQueue, sdkworker.Options{
		Identity:                 opts.Identity,
		DeadlockDetectionTimeout: workflows.DeadlockDetectionTimeout,
		DisableWorkflowWorker:    opts.ActivitiesOnly,
		// Heartbeats leave as often as attempt.TickEvery makes them (the
		// SDK would hold them back for 80% of the heartbeat timeout):
		// a live attempt never misses its timeout for a slow one.
		MaxHeartbeatThrottleInterval: attempt.TickEvery(actions.DefaultHeartbeat),
		Interceptors: []interceptor.WorkerInterceptor{
			&kedgeMetrics{},
			&trust.Guard{Registry: opts.Clusters, Logger: opts.Logger},
			&attempt.Interceptor{Interceptor: resume.Interceptor{DataConverter: opts.DataConverter}}, // a step's failures kept while Temporal retries its action
		},
	})
	if !opts.ActivitiesOnly {
		workflows.Register(w)
	}
	w.RegisterActivityWithOptions((&admitter{client: c}).AdmitRun, activity.RegisterOptions{Name: workflows.AdmitRunActivity})
	notifier := chat.NewNotifier(c, opts.Logger) // posts chat-started runs' progress to Slack
	notifier.ResponseURLAllowed = opts.ResponseURLAllowed
	notifier.DataConverter = opts.DataConverter
	w.RegisterActivityWithOptions(notifier.Follow, activity.RegisterOptions{Name: workflows.ChatFollowActivity})
	pool, err := registerActions(w, opts)
	if err != nil {
		panic(err) // a build whose actions do not match the table; TestActionsMatchTheTable catches it first
	}
	return &Worker{Worker: w, pool: pool}
}

// Stop stops polling, waits for running activities and closes SSH
// connections.
func (w *Worker) Stop() {
	w.Worker.Stop()
	_ = w.pool.Close()
}
