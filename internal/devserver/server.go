package devserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"

	uiserver "github.com/temporalio/ui-server/v2/server"

	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/internal/secretfile"

	"kedge.dev/kedge/internal/freeport"
)

// Config configures an embedded server.
type Config struct {
	DataDir       string       // SQLite file at DataDir/temporal.db; "" keeps state in memory
	FrontendAddr  string       // gRPC frontend host:port, e.g. 127.0.0.1:7233; port 0 picks a free one
	UIAddr        string       // Web UI host:port, e.g. 127.0.0.1:8233 (port 0 picks one); "" runs no UI
	Namespace     string       // created at start when missing (default "default"), retention 3 days, with Kedge's search attributes
	Logger        *slog.Logger // the server's warnings and errors; nil discards them
	CodecEndpoint string       // codec server URL for the Web UI, optional
	// TLS, when set, has every connection to the server use mutual TLS:
	// clients need a certificate from TLS.CAFile.
	TLS *TLS
}

// TLS is the server's side of mutual TLS, as `kedge setup tls` writes it.
type TLS struct {
	CertFile, KeyFile string // the server's certificate: the frontend's, its services' to one another, its own clients'
	CAFile            string // the CA clients' certificates must chain to (and the server's does)
	ServerName        string // a name the server certificate holds, checked by the server's own clients
}

// rootTLS configures the frontend, internode traffic and the system
// worker for mutual TLS.
func (t *TLS) rootTLS() config.RootTLS {
	server := config.ServerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFiles: []string{t.CAFile}, RequireClientAuth: true}
	client := config.ClientTLS{ServerName: t.ServerName, RootCAFiles: []string{t.CAFile}}
	return config.RootTLS{
		Internode:    config.GroupTLS{Server: server, Client: client},
		Frontend:     config.GroupTLS{Server: server, Client: client},
		SystemWorker: config.WorkerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile, Client: client},
	}
}

// clientConfig is what the server's own clients (readiness probes,
// search attributes) and its Web UI dial with: the server certificate,
// which is also good for client authentication.
func (t *TLS) clientConfig() (*tls.Config, error) {
	certPEM, err := os.ReadFile(t.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := secretfile.Read(t.KeyFile) // the server's key: its owner's alone
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", t.CertFile, t.KeyFile, err)
	}
	ca, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no certificate", t.CAFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: t.ServerName, MinVersion: tls.VersionTLS12}, nil
}

// Server is a running embedded Temporal server, and its Web UI if asked for.
type Server struct {
	cfg      Config
	frontend string
	uiURL    string
	temporal temporal.Server
	ui       *uiserver.Server
	log      serverLog
}

// clusterName is the name of the one cluster.
const clusterName = "active"

// namespaceRefresh is how often the services reread namespaces (the
// server's default is 2 s).
const namespaceRefresh = 250 * time.Millisecond

// dynamicConfig tunes a single node for latency rather than throughput.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// Move transfer tasks (e.g. "schedule this activity") to matching
		// at once instead of at the default 20 polls per second.
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): 1000,
		// One partition per task queue: with more, a task and its poller
		// can sit on different partitions until forwarding brings them
		// together.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// A search attribute added by EnsureSearchAttributes is usable at
		// once, not after the cache's refresh interval; with SQL
		// visibility its column mapping is namespace config, which every
		// service rereads this often.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		dynamicconfig.NamespaceCacheRefreshInterval.Key():           namespaceRefresh,
		// Visibility calls (list, count) per second: every start asks
		// whether its runbook already runs on its cluster, and the Web UI
		// and the CLI list runs; the default of 10 refused lists with
		// "namespace rate limit exceeded" on a busy single node.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// Workflow updates (UpdateWorkflowExecution).
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key():              true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecutionAsyncAccepted.Key(): true,
	}
}

// Start starts the Temporal server (and the Web UI when cfg.UIAddr is set)
// and returns once the frontend, history and matching services answer.
// ctx bounds the start-up only.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	host, port, err := splitAddr(cfg.FrontendAddr)
	if err != nil {
		return nil, fmt.Errorf("frontend: %w", err)
	}
	if port, err = resolvePort(host, port); err != nil {
		return nil, fmt.Errorf("frontend: %w", err)
	}
	// gRPC for history, matching and worker, and the frontend's HTTP API.
	ports, err := freeport.Pick(host, 4)
	if err != nil {
		return nil, err
	}
	addr := func(p int) string { return net.JoinHostPort(host, strconv.Itoa(p)) }
	frontend := addr(port)

	sqlCfg := sqlConfig(cfg.DataDir)
	if err := prepareDB(sqlCfg, cfg.DataDir, cfg.Namespace); err != nil {
		return nil, err
	}

	rpc := func(grpcPort int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpcPort, BindOnIP: host}}
	}
	services := map[string]config.Service{
		string(primitives.FrontendService): rpc(port),
		string(primitives.HistoryService):  rpc(ports[0]),
		string(primitives.MatchingService): rpc(ports[1]),
		string(primitives.WorkerService):   rpc(ports[2]),
	}
	fe := services[string(primitives.FrontendService)]
	fe.RPC.HTTPPort = ports[3]
	services[string(primitives.FrontendService)] = fe

	// One process runs every service, so membership is static: each
	// service is the one host at its gRPC address. Gossip membership
	// (ringpop) would keep the hosts of the previous run in the database
	// and, after a restart, spend close to a minute trying to join them.
	hosts := map[primitives.ServiceName]static.Hosts{}
	for name, svc := range services {
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(addr(svc.RPC.GRPCPort))
	}

	conf := &config.Config{
		Global: config.Global{
			Membership: config.Membership{BroadcastAddress: host},
		},
		Persistence: config.Persistence{
			DefaultStore:     "sqlite",
			VisibilityStore:  "sqlite",
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{"sqlite": {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {
					Enabled:                true,
					InitialFailoverVersion: 1,
					RPCAddress:             frontend,
					// Used when the database is new; afterwards the
					// server keeps the ID it stored then.
					ClusterID: newUUID(),
				},
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
	if cfg.TLS != nil {
		conf.Global.TLS = cfg.TLS.rootTLS()
	}

	s := &Server{cfg: cfg, frontend: frontend, log: newServerLog(cfg.Logger)}
	s.temporal, err = temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(s.log),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	)
	if err != nil {
		return nil, fmt.Errorf("build the Temporal server: %w", err)
	}
	if err := s.temporal.Start(); err != nil {
		return nil, fmt.Errorf("start the Temporal server: %w", err)
	}
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	// Kedge's search attributes, so the Web UI's list filters by cluster,
	// runbook, node and status (what `kedge setup` does on a shared server).
	if err := s.EnsureSearchAttributes(ctx, searchattr.Definitions()); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("register Kedge's search attributes: %w", err)
	}
	if cfg.UIAddr != "" {
		if err := s.startUI(ctx); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// waitReady returns once the namespace is known (frontend), a task queue
// can be described (matching) and a workflow can be looked up (history).
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if last = s.probe(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Temporal server on %s did not become ready: %w", s.frontend, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) probe(ctx context.Context) error {
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	svc := c.WorkflowService()
	if _, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.cfg.Namespace}); err != nil {
		return err
	}
	if _, err := svc.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     s.cfg.Namespace,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: "kedge-devserver-probe", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
	}); err != nil {
		return err
	}
	_, err = svc.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: s.cfg.Namespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: "kedge-devserver-probe-" + newUUID()},
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil // history answered
	}
	if err == nil {
		return nil
	}
	return err
}

func (s *Server) dial(ctx context.Context) (client.Client, error) {
	opts := client.Options{
		HostPort:  s.frontend,
		Namespace: s.cfg.Namespace,
		Logger:    sdkLog{},
	}
	// Its own frontend, in this process: gzip would only cost CPU.
	opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	if s.cfg.TLS != nil {
		tc, err := s.cfg.TLS.clientConfig()
		if err != nil {
			return nil, err
		}
		opts.ConnectionOptions.TLS = tc
	}
	return client.DialContext(ctx, opts)
}

// FrontendAddress is the gRPC host:port clients dial.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIURL is the Web UI's base URL ("http://host:port"), or "" without a UI.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace is the namespace the server was started with.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// EnsureSearchAttributes adds those of attrs that the namespace lacks,
// through the operator service (searchattr.Ensure, as `kedge setup` does),
// and waits until the server accepts a start that sets them. A name that exists with another
// type is an error.
func (s *Server) EnsureSearchAttributes(ctx context.Context, attrs map[string]enumspb.IndexedValueType) error {
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := searchattr.Ensure(ctx, c.OperatorService(), s.cfg.Namespace, attrs); err != nil {
		return err
	}
	// Ready when a start with them is accepted, whether they were added
	// now or by an earlier run of this server.
	return s.waitSearchAttributes(ctx, c, attrs)
}

// waitSearchAttributes returns once a start that sets attrs is accepted:
// what `kedge run` does next. Each of Temporal's services learns new
// search attributes when its namespace cache refreshes, so the frontend
// may filter by them before the history service accepts a start with
// them. The probe run it starts is terminated and deleted at once.
func (s *Server) waitSearchAttributes(ctx context.Context, c client.Client, attrs map[string]enumspb.IndexedValueType) error {
	var updates []sdktemporal.SearchAttributeUpdate
	var names []string
	for name, typ := range attrs {
		names = append(names, name)
		if typ == enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			updates = append(updates, sdktemporal.NewSearchAttributeKeyKeyword(name).ValueSet("kedge-ready-probe"))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		id := "kedge-devserver-ready-probe-" + newUUID()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                    id,
			TaskQueue:             "kedge-devserver-probe",
			TypedSearchAttributes: sdktemporal.NewSearchAttributes(updates...),
		}, "kedge-devserver-ready-probe")
		if err == nil {
			_ = c.TerminateWorkflow(ctx, id, run.GetRunID(), "readiness probe")
			_, _ = c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
				Namespace: s.cfg.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: run.GetRunID()},
			})
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes %s added, but a start with them is still refused: %w", strings.Join(names, ", "), err)
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// Stop stops the Web UI and the server. The server's logs end here: what
// the services say while going down is noise.
func (s *Server) Stop() error {
	if s.ui != nil {
		s.ui.Stop()
		s.ui = nil
	}
	s.log.mute()
	return s.temporal.Stop()
}
