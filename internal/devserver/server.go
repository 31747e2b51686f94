package devserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/metrics"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// Config configures an embedded server.
type Config struct {
	DataDir       string       // the SQLite file lives here; "" keeps state in memory
	FrontendAddr  string       // host:port of the gRPC frontend; port 0 picks one
	UIAddr        string       // host:port of the Web UI; "" runs no UI
	Namespace     string       // created when missing (default "default")
	Logger        *slog.Logger // server warnings and errors; nil discards them
	CodecEndpoint string       // codec server URL for the UI, optional
}

// Server is a running embedded Temporal server.
type Server struct {
	cfg      Config
	frontend string
	uiURL    string
	temporal temporal.Server
	ui       *uiserver.Server
}

// Retention of closed runs in the dev namespace.
const retention = 72 * time.Hour

// Start starts the server (and the UI) and returns when the frontend
// answers.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	host, port, err := splitAddr(cfg.FrontendAddr)
	if err != nil {
		return nil, err
	}
	if port == 0 {
		if port, err = freePort(host); err != nil {
			return nil, err
		}
	} else if err := checkFree(host, port); err != nil {
		return nil, err
	}
	frontend := net.JoinHostPort(host, strconv.Itoa(port))

	sqlCfg := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		ConnectAttributes: map[string]string{"journal_mode": "wal", "synchronous": "normal", "busy_timeout": "10000"},
		// One connection: with several, SQLite's WAL mode reports
		// SQLITE_BUSY_SNAPSHOT (517) when two of them race to write.
		MaxConns:     1,
		MaxIdleConns: 1,
	}
	if cfg.DataDir == "" {
		sqlCfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlCfg.DatabaseName = "kedge-" + randomID()[:8]
	} else {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		sqlCfg.DatabaseName = filepath.Join(cfg.DataDir, "temporal.db")
		sqlCfg.ConnectAttributes["mode"] = "rwc"
	}
	// An in-memory database gets its schema from the SQLite plugin; a file
	// gets it once, when it is created.
	if _, err := os.Stat(sqlCfg.DatabaseName); cfg.DataDir != "" && errors.Is(err, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
			return nil, fmt.Errorf("create the Temporal schema: %w", err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig("active", cfg.Namespace, false, nil)
	if err != nil {
		return nil, err
	}
	ns.Detail.Config.Retention = durationpb.New(retention)
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", cfg.Namespace, err)
	}

	svc := func(grpcPort int) (config.Service, error) {
		mp, err := freePort(host)
		if err != nil {
			return config.Service{}, err
		}
		if grpcPort == 0 {
			if grpcPort, err = freePort(host); err != nil {
				return config.Service{}, err
			}
		}
		return config.Service{RPC: config.RPC{GRPCPort: grpcPort, MembershipPort: mp, BindOnIP: host}}, nil
	}
	services := map[string]config.Service{}
	for name, p := range map[string]int{"frontend": port, "history": 0, "matching": 0, "worker": 0} {
		if services[name], err = svc(p); err != nil {
			return nil, err
		}
	}
	pprof, err := freePort(host)
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort(host)
	if err != nil {
		return nil, err
	}
	conf := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host},
			PProf:      config.PProf{Port: pprof},
			Metrics: &metrics.Config{Prometheus: &metrics.PrometheusConfig{
				ListenAddress: net.JoinHostPort(host, strconv.Itoa(metricsPort)), HandlerPath: "/metrics",
			}},
		},
		Persistence: config.Persistence{
			DefaultStore: sqliteplugin.PluginName, VisibilityStore: sqliteplugin.PluginName, NumHistoryShards: 1,
			DataStores: map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace: false, FailoverVersionIncrement: 10,
			MasterClusterName: "active", CurrentClusterName: "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend, ClusterID: clusterID(cfg.DataDir)},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            services,
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: frontend},
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.TransferProcessorMaxPollRPS.Key():                        1000,
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():                 1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key():                1,
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key():            true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key():              true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecutionAsyncAccepted.Key(): true,
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(slogLogger{l: cfg.Logger}),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("build Temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start Temporal server: %w", err)
	}
	s := &Server{cfg: cfg, frontend: frontend, temporal: srv}
	if err := s.waitReady(ctx); err != nil {
		_ = srv.Stop()
		return nil, err
	}
	if cfg.UIAddr != "" {
		if err := s.startUI(); err != nil {
			_ = srv.Stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		c, err := client.DialContext(ctx, client.Options{HostPort: s.frontend, Namespace: s.cfg.Namespace, Logger: quiet{}})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.cfg.Namespace})
			c.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("temporal server on %s did not become ready: %v", s.frontend, last)
}

func (s *Server) startUI() error {
	host, port, err := splitAddr(s.cfg.UIAddr)
	if err != nil {
		return err
	}
	if port == 0 {
		if port, err = freePort(host); err != nil {
			return err
		}
	} else if err := checkFree(host, port); err != nil {
		return fmt.Errorf("web UI: %w", err)
	}
	s.uiURL = "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: s.frontend,
		Host:                host,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    s.cfg.Namespace,
		DisableNewsFetch:    true,
		HideLogs:            true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		Codec:               uiconfig.Codec{Endpoint: s.cfg.CodecEndpoint},
	}
	s.ui = uiserver.NewServer(uioptions.WithConfigProvider(cfg))
	go func() { _ = s.ui.Start() }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.uiURL + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("web UI on %s did not start", s.uiURL)
}

// FrontendAddress is the gRPC host:port clients dial.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIURL is the Web UI's base URL, or "" without a UI.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace is the namespace the server was started with.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// EnsureSearchAttributes adds the custom search attributes that are missing.
func (s *Server) EnsureSearchAttributes(ctx context.Context, attrs map[string]enumspb.IndexedValueType) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: s.frontend, Namespace: s.cfg.Namespace, Logger: quiet{}})
	if err != nil {
		return err
	}
	defer c.Close()
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.cfg.Namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range attrs {
		if _, ok := have.CustomAttributes[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: s.cfg.Namespace, SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}

// Stop stops the UI and the server.
func (s *Server) Stop() error {
	if s.ui != nil {
		s.ui.Stop()
	}
	return s.temporal.Stop()
}

func splitAddr(addr string) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", 0, nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: bad port", addr)
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	return host, port, nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func checkFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s:%d is in use (is another kedge dev running?): %w", host, port, err)
	}
	return l.Close()
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// clusterID is a UUID kept beside the database, so a restarted server is
// the same cluster.
func clusterID(dataDir string) string {
	if dataDir == "" {
		return randomID()
	}
	p := filepath.Join(dataDir, "cluster-id")
	if b, err := os.ReadFile(p); err == nil && len(b) >= 36 {
		return string(b[:36])
	}
	id := randomID()
	_ = os.WriteFile(p, []byte(id), 0o644)
	return id
}

// slogLogger routes the server's logs to slog at warn and above.
type slogLogger struct{ l *slog.Logger }

func attrs(tags []tag.Tag) []any {
	out := make([]any, 0, len(tags))
	for _, t := range tags {
		out = append(out, slog.Any(t.Key(), t.Value()))
	}
	return out
}

func (s slogLogger) Debug(string, ...tag.Tag)           {}
func (s slogLogger) Info(string, ...tag.Tag)            {}
func (s slogLogger) Warn(msg string, tags ...tag.Tag)   { s.l.Warn(msg, attrs(tags)...) }
func (s slogLogger) Error(msg string, tags ...tag.Tag)  { s.l.Error(msg, attrs(tags)...) }
func (s slogLogger) DPanic(msg string, tags ...tag.Tag) { s.l.Error(msg, attrs(tags)...) }
func (s slogLogger) Panic(msg string, tags ...tag.Tag)  { s.l.Error(msg, attrs(tags)...); panic(msg) }
func (s slogLogger) Fatal(msg string, tags ...tag.Tag)  { s.l.Error(msg, attrs(tags)...); os.Exit(1) }

var _ log.Logger = slogLogger{}

// quiet silences the SDK client used for readiness checks.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
