package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// Kedge's counters, as the worker's interceptors emit them; Prometheus
// sees each with a _total suffix (kedge_steps_run_total, ...). Each carries
// the labels runbook and cluster besides the SDK's own (namespace,
// task_queue, workflow_type).
const (
	// StepsRun counts the steps of finished runbooks that ran (succeeded,
	// failed or were cancelled; not skipped, not left unrun).
	StepsRun = "kedge_steps_run"
	// StepsFailed counts the steps of finished runbooks that failed.
	StepsFailed = "kedge_steps_failed"
	// NodesRolled counts the items of rollouts whose node runbook
	// succeeded.
	NodesRolled = "kedge_nodes_rolled"
)

// DefaultInterval is how often the SDK's metrics reach the Prometheus
// registry.
const DefaultInterval = time.Second

// sanitize is the SDK's Prometheus sanitizing with label values left
// readable: a runbook named kubelet-image-swap keeps its dashes.
var sanitize = func() tally.SanitizeOptions {
	o := sdktally.PrometheusSanitizeOptions
	o.ValueCharacters = tally.ValidCharacters{Ranges: tally.AlphanumericRange, Characters: []rune{'_', '-', '.', '/', ':'}}
	return o
}()

// Registry holds one worker's metrics.
type Registry struct {
	handler client.MetricsHandler
	http    http.Handler
	closer  io.Closer
}

// New builds a registry whose handler goes into the worker's client
// options (client.Options.MetricsHandler). Errors registering a metric
// (the SDK emits a few names with more than one label set) are logged
// once per name rather than panicking.
func New(log *slog.Logger, interval time.Duration) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var seen sync.Map
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError: func(err error) {
			if _, dup := seen.LoadOrStore(err.Error(), true); !dup {
				log.Warn("metrics: a metric was not registered", "err", err)
			}
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, interval)
	return &Registry{
		handler: sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
		http:    reporter.HTTPHandler(),
		closer:  closer,
	}
}

// Handler is the SDK metrics handler to put in the worker's client
// options.
func (r *Registry) Handler() client.MetricsHandler { return r.handler }

// Close flushes the last values and stops the reporting loop.
func (r *Registry) Close() error { return r.closer.Close() }

// Mux serves /metrics and /healthz; health answers whether the worker can
// work (nil: yes).
func (r *Registry) Mux(health func(context.Context) error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.http)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 3*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if health != nil {
			if err := health(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "unhealthy: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Serve serves Mux(health) on ln until ctx ends.
func (r *Registry) Serve(ctx context.Context, ln net.Listener, health func(context.Context) error) error {
	srv := &http.Server{Handler: r.Mux(health), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
