package chatops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"kedge.dev/kedge/internal/responseurl"
	"kedge.dev/kedge/workflows"
)

// ReplyWithin is how long a request may take before its answer: Slack
// gives up after 3 s, so Temporal calls get a little less.
const ReplyWithin = 2500 * time.Millisecond

// Server answers Slack and webhook requests. Everything it needs to know
// again is in Temporal: a request's run is found by its workflow ID,
// derived from the request. What it keeps in memory (the run it started
// last per runbook and cluster) only narrows the moment visibility lags a
// start; a restart loses nothing that matters.
type Server struct {
	Config *Config
	Client client.Client
	// DataConverter reads the memos of runs (the client's, with the
	// payload codec); nil is the SDK's default.
	DataConverter converter.DataConverter
	// SigningSecret is Slack's signing secret ("" refuses Slack requests).
	SigningSecret string
	UIURL         string // base URL of the Temporal Web UI, for links
	Namespace     string
	TaskQueue     string
	Logger        *slog.Logger
	// HTTP posts the acknowledgement of a button click to its response_url.
	HTTP *http.Client
	// Now is the clock (tests move it); nil is time.Now.
	Now func() time.Time

	runsMu sync.Mutex
	runs   map[string]*runbookRuns // by RUNBOOK/CLUSTER

	flFiles fleetLockFiles // FleetLock's inventories and runbooks, by cluster
}

// runbookRuns is what one server knows of a runbook's runs on a cluster.
type runbookRuns struct {
	hold chan struct{} // one start at a time
	last string        // the workflow ID it started last
}

// Handler routes:
//
//	POST /slack/commands     Slack slash commands (/kedge ...)
//	POST /slack/interactive  Slack interactivity (Continue / Abort buttons)
//	POST /hooks/run          signed JSON {runbook, inventory, params}
//	POST /fleetlock/...      FleetLock (Zincati): CLUSTER/NODE/TOKEN/v1/pre-reboot, .../v1/steady-state
//	GET  /healthz            liveness
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/commands", s.slashCommand)
	mux.HandleFunc("POST /slack/interactive", s.interactive)
	mux.HandleFunc("POST /hooks/run", s.hookRun)
	mux.Handle(FleetLockPrefix, s.fleetLockHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return s.recoverer(mux)
}

// recoverer turns a panic into a 500 and a log line: bad input must never
// take the server down.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log().Error("panic serving a request", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) namespace() string {
	if s.Namespace == "" {
		return "default"
	}
	return s.Namespace
}

func (s *Server) taskQueue() string {
	if s.TaskQueue == "" {
		return workflows.DefaultTaskQueue
	}
	return s.TaskQueue
}

func (s *Server) dataConverter() converter.DataConverter {
	if s.DataConverter == nil {
		return converter.GetDefaultDataConverter()
	}
	return s.DataConverter
}

// link is the Web UI page of a run.
func (s *Server) link(id, runID string) string {
	return WorkflowLink(s.UIURL, s.namespace(), id, runID)
}

// WorkflowLink is the Temporal Web UI page of a workflow run.
func WorkflowLink(base, namespace, id, runID string) string {
	base = strings.TrimRight(base, "/")
	if base == "" {
		base = "http://127.0.0.1:8233"
	}
	u := fmt.Sprintf("%s/namespaces/%s/workflows/%s", base, url.PathEscape(namespace), url.PathEscape(id))
	if runID != "" {
		u += "/" + url.PathEscape(runID)
	}
	return u + "/history"
}

// audit logs one decision about a request. Never pass a secret.
func (s *Server) audit(sub Subject, action, outcome, reason string, attrs ...any) {
	args := []any{"audit", true, "source", sub.Source, "subject", sub.String(), "action", action, "outcome", outcome}
	if sub.ChannelID != "" {
		args = append(args, "channel", sub.ChannelID)
	}
	if reason != "" {
		args = append(args, "reason", reason)
	}
	args = append(args, attrs...)
	level := slog.LevelInfo
	if outcome != "allowed" {
		level = slog.LevelWarn
	}
	s.log().Log(context.Background(), level, "kedge webhook: "+action+" "+outcome, args...)
}

// auditUnauthenticated logs a request refused before its sender was known.
func (s *Server) auditUnauthenticated(r *http.Request, err error) {
	s.log().Warn("kedge webhook: request refused", "audit", true, "path", r.URL.Path, "remote", r.RemoteAddr,
		"outcome", "refused", "reason", err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// statusOf is the HTTP status for an error of the start/decide paths.
func statusOf(err error) int {
	var he *httpError
	var ref *Refused
	var use *UsageError
	switch {
	case errors.As(err, &he):
		return he.Status
	case errors.As(err, &ref):
		return http.StatusForbidden
	case errors.As(err, &use):
		return http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// messageOf is what the sender is told about an error.
func messageOf(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("Temporal did not answer within %s; nothing may have started yet — check with /kedge list before trying again", ReplyWithin)
	}
	return err.Error()
}

// Serve answers requests on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(s.log().Handler(), slog.LevelWarn),
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// EmptyConfig allows nothing: every request is refused (and audited).
func EmptyConfig() *Config {
	return &Config{File: "(none)", Clusters: map[string]string{}, keys: map[string][]byte{}, ResponseURLs: slices.Clone(responseurl.DefaultPrefixes)}
}
