package starter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/devserver"
	"kedge.dev/kedge/internal/responseurl"
	"kedge.dev/kedge/worker"
	"kedge.dev/kedge/workflows"
)

// DevOptions configure `kedge dev`.
type DevOptions struct {
	DataDir   string // SQLite state; survives restarts
	Address   string // Temporal frontend host:port
	UIAddress string // Web UI host:port ("" = no UI)
	Namespace string
	TaskQueue string
	// CodecKey is the payload encryption key file, created when missing
	// ("" = $KEDGE_CODEC_KEY, else the default path).
	CodecKey string
	// WebhookAddress is where `kedge webhook` listens ("" = not started);
	// WebhookConfig its authorization config ("" = everything refused);
	// SlackSigningSecretFile the Slack signing secret (else
	// $KEDGE_SLACK_SIGNING_SECRET, else one generated in DataDir).
	WebhookAddress, WebhookConfig, SlackSigningSecretFile string
	// Clusters are the inventories (files or directories) the worker
	// serves ("" = DataDir/clusters).
	Clusters []string
	// Ready, when set, is called once the server, UI and worker are up.
	Ready func(s *devserver.Server)
}

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run a Temporal server, its Web UI and a worker in this process (state kept in --data-dir)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Usage: "where the server keeps its SQLite state", Value: defaultDataDir()},
			&cli.StringFlag{Name: "address", Value: "127.0.0.1:7233", Usage: "Temporal frontend `HOST:PORT` to listen on"},
			&cli.StringFlag{Name: "ui-address", Value: "127.0.0.1:8233", Usage: "Web UI `HOST:PORT` to listen on (empty: no UI)"},
			&cli.StringFlag{Name: "namespace", Value: "default"},
			&cli.StringFlag{Name: "task-queue", Value: workflows.DefaultTaskQueue, EnvVars: []string{"KEDGE_TASK_QUEUE"}},
			codecKeyFlag,
			clustersFlag(),
			&cli.StringFlag{Name: "webhook-address", Value: "127.0.0.1:8235", Usage: "`HOST:PORT` of the ChatOps webhook server (empty: none)"},
			&cli.StringFlag{Name: "webhook-config", Usage: "the webhook's authorization config `FILE` (kind: ChatOps)", EnvVars: []string{envWebhookConfig}},
			&cli.StringFlag{Name: "slack-signing-secret-file", Usage: "`FILE` with the Slack signing secret (default $" + envSigningSecret + ", else one generated in --data-dir)", EnvVars: []string{envSigningSecretFile}},
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return RunDev(ctx, DevOptions{
				DataDir: c.String("data-dir"), Address: c.String("address"), UIAddress: c.String("ui-address"),
				Namespace: c.String("namespace"), TaskQueue: c.String("task-queue"), CodecKey: c.String("codec-key"),
				WebhookAddress: c.String("webhook-address"), WebhookConfig: c.String("webhook-config"),
				SlackSigningSecretFile: c.String("slack-signing-secret-file"), Clusters: c.StringSlice("clusters"),
			}, c.App.ErrWriter)
		},
	}
}

// devCodec loads the dev key file, creating it on first use.
func devCodec(path string, out io.Writer) (*codec.Codec, error) {
	if path == "" {
		path = os.Getenv(codec.EnvKeyFile)
	}
	if path == "" {
		path = codec.DefaultPath()
	}
	if path == "" {
		return nil, failed("dev: %v", codec.ErrNoPath)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		id, err := codec.Generate(path)
		if err != nil {
			return nil, failed("dev: %v", err)
		}
		fmt.Fprintf(out, "kedge dev: new payload encryption key %s in %s\n", id, path)
	}
	return loadCodec(path)
}

// devTokenPath is where kedge dev keeps its codec endpoint's token.
func devTokenPath(o DevOptions) string {
	dir := o.DataDir
	if dir == "" {
		dir = "."
	}
	return filepath.Join(dir, "codec-token")
}

// startDevCodec serves kedge dev's codec endpoint on a free loopback port,
// for its Web UI's origin only and with a token: the one in the data
// directory (made on first use; its path is printed, never it), or a
// browser session from /login. It returns the endpoint and a one-time
// login link for the operator, who started kedge dev: another local user
// reaches the endpoint, the Web UI and its settings, but holds neither.
func startDevCodec(ctx context.Context, o DevOptions, cd *codec.Codec, out io.Writer) (string, string, error) {
	path := devTokenPath(o)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := writeToken(path); err != nil {
			return "", "", failed("dev: codec token: %v", err)
		}
		fmt.Fprintf(out, "kedge dev: new codec endpoint token in %s\n", path)
	}
	token, err := readToken(path)
	if err != nil {
		return "", "", failed("dev: codec token: %v", err)
	}
	code := make([]byte, 16)
	if _, err := rand.Read(code); err != nil {
		return "", "", failed("dev: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", failed("dev: codec endpoint: %v", err)
	}
	h, err := cd.Endpoint(codec.EndpointOptions{Token: token, Origins: []string{"http://" + o.UIAddress},
		Hosts: codec.LoopbackHosts(ln.Addr().String()), LoginCode: hex.EncodeToString(code)})
	if err != nil {
		ln.Close()
		return "", "", failed("dev: %v", err)
	}
	go func() { _ = serveCodec(ctx, ln, h) }()
	url := "http://" + ln.Addr().String()
	return url, url + "/login?code=" + hex.EncodeToString(code), nil
}

func defaultDataDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kedge", "dev")
	}
	return ".kedge-dev"
}

// RunDev runs the embedded server, UI and a worker until ctx ends.
func RunDev(ctx context.Context, o DevOptions, out io.Writer) error {
	// The embedded Temporal and its Web UI authenticate nobody: whoever
	// reaches them could cancel runs and read what the codec does not
	// seal. They serve this machine only.
	for _, a := range []struct{ flag, addr string }{{"--address", o.Address}, {"--ui-address", o.UIAddress}} {
		if a.addr != "" && codec.LoopbackHosts(a.addr) == nil {
			return usageError("dev: %s %s: kedge dev serves Temporal and its Web UI without authentication, so only on a loopback address (127.0.0.1, ::1, localhost); for a team, use the compose install (README, Team install)", a.flag, a.addr)
		}
	}
	if o.DataDir != "" {
		if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
			return failed("dev: %v", err)
		}
	}
	if len(o.Clusters) == 0 {
		// Inventories dropped here are served; none at first.
		d := filepath.Join(o.DataDir, "clusters")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return failed("dev: %v", err)
		}
		o.Clusters = []string{d}
	}
	clusters, err := loadClusters("kedge dev", o.Clusters, out)
	if err != nil {
		return err
	}
	webhookCfg, err := devWebhookConfig(o)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cd, err := devCodec(o.CodecKey, out)
	if err != nil {
		return err
	}
	// The Web UI decodes payloads through a codec endpoint beside it.
	var codecURL, loginURL string
	if o.UIAddress != "" {
		if o.UIAddress, err = devserver.ResolveUIAddr(o.UIAddress); err != nil {
			return failed("dev: %v", err)
		}
		if codecURL, loginURL, err = startDevCodec(ctx, o, cd, out); err != nil {
			return err
		}
	}
	srv, err := devserver.Start(ctx, devserver.Config{
		DataDir: o.DataDir, FrontendAddr: o.Address, UIAddr: o.UIAddress, Namespace: o.Namespace, Logger: log,
		CodecEndpoint: codecURL,
	})
	if err != nil {
		return cli.Exit(fmt.Sprintf("kedge dev: start Temporal on %s: %v", o.Address, err), ExitUnreachable)
	}
	defer srv.Stop()
	copts := client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace(), Logger: quietLogger()}
	copts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{} // the server is in this process
	cd.Apply(&copts)
	cl, err := client.DialContext(ctx, copts)
	if err != nil {
		return cli.Exit(fmt.Sprintf("kedge dev: connect to the embedded server: %v", err), ExitUnreachable)
	}
	defer cl.Close()
	w := worker.New(cl, worker.Options{TaskQueue: o.TaskQueue, Logger: log, Clusters: clusters, DataConverter: copts.DataConverter, SealKeys: cd,
		ResponseURLAllowed: func(u string) bool { return responseurl.Allowed(webhookCfg.ResponseURLs, u) }})
	if err := w.Start(); err != nil {
		return failed("dev: start worker: %v", err)
	}
	defer w.Stop()
	fmt.Fprintf(out, "kedge dev: Temporal %s (namespace %s), state in %s\n", srv.FrontendAddress(), srv.Namespace(), o.DataDir)
	if u := srv.UIURL(); u != "" {
		fmt.Fprintf(out, "kedge dev: Web UI %s\n", u)
	}
	if loginURL != "" {
		fmt.Fprintf(out, "kedge dev: to see decoded payloads in the Web UI, open %s once in your browser (a one-time link: afterwards, log in at %s/login with the token in %s)\n",
			loginURL, codecURL, devTokenPath(o))
	}
	if err := startDevWebhook(ctx, o, webhookCfg, cl, cd.DataConverter(), srv.UIURL(), out); err != nil {
		return err
	}
	fmt.Fprintf(out, "kedge dev: worker polling task queue %s; Ctrl-C stops everything\n", o.TaskQueue)
	if o.Ready != nil {
		o.Ready(srv)
	}
	<-ctx.Done()
	fmt.Fprintln(out, "kedge dev: stopping")
	return nil
}
