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
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"kedge.dev/kedge/chatops"
	"kedge.dev/kedge/internal/secretfile"
)

// Where the webhook server's secrets come from.
const (
	envSigningSecret     = "KEDGE_SLACK_SIGNING_SECRET"
	envSigningSecretFile = "KEDGE_SLACK_SIGNING_SECRET_FILE"
	envWebhookConfig     = "KEDGE_WEBHOOK_CONFIG"
)

func webhookCommand() *cli.Command {
	return &cli.Command{
		Name:  "webhook",
		Usage: "serve Slack slash commands and approval buttons, and signed CI webhooks (POST /hooks/run)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8235", Usage: "`HOST:PORT` to listen on"},
			&cli.StringFlag{Name: "config", Usage: "authorization config `FILE` (kind: ChatOps)", EnvVars: []string{envWebhookConfig}},
			&cli.StringFlag{Name: "slack-signing-secret-file", Usage: "`FILE` holding the Slack app's signing secret (or $" + envSigningSecret + ")", EnvVars: []string{envSigningSecretFile}},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if c.String("config") == "" {
				return usageError("webhook needs --config FILE (or $%s)", envWebhookConfig)
			}
			cfg, err := chatops.LoadConfig(c.String("config"))
			if err != nil {
				return failed("invalid webhook config:\n%v", err)
			}
			secret, err := signingSecret(c.String("slack-signing-secret-file"))
			if err != nil {
				return failed("%v", err)
			}
			opts, err := clientOptions(c)
			if err != nil {
				return err
			}
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return failed("webhook: %v", err)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv := &chatops.Server{
				Config: cfg, Client: cl, DataConverter: opts.DataConverter, SigningSecret: secret,
				UIURL: c.String("ui-url"), Namespace: c.String("namespace"), TaskQueue: c.String("task-queue"),
				Logger: slog.New(slog.NewJSONHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelInfo})),
			}
			slackNote := "Slack requests are refused: no signing secret ($" + envSigningSecret + " or --slack-signing-secret-file)"
			if secret != "" {
				slackNote = "Slack: /slack/commands and /slack/interactive"
			}
			fmt.Fprintf(c.App.ErrWriter, "kedge webhook on http://%s (config %s); %s; CI: POST /hooks/run\n", ln.Addr(), cfg.File, slackNote)
			if err := srv.Serve(ctx, ln); err != nil {
				return failed("webhook: %v", err)
			}
			return nil
		},
	}
}

// signingSecret reads Slack's signing secret from $KEDGE_SLACK_SIGNING_SECRET
// or a file; "" when neither is set.
func signingSecret(file string) (string, error) {
	if s := strings.TrimSpace(os.Getenv(envSigningSecret)); s != "" {
		return s, nil
	}
	if file == "" {
		return "", nil
	}
	data, err := secretfile.Read(file)
	if err != nil {
		return "", fmt.Errorf("read the Slack signing secret: %w", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "", fmt.Errorf("the Slack signing secret file %s is empty", file)
	}
	return s, nil
}

// devSigningSecret is `kedge dev`'s signing secret: the configured one, or
// one generated into dir on first use (its path is printed, never it).
func devSigningSecret(file, dir string, out io.Writer) (string, error) {
	if s, err := signingSecret(file); s != "" || err != nil {
		return s, err
	}
	path := filepath.Join(dir, "slack-signing-secret")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("write a Slack signing secret: %w", err)
		}
		fmt.Fprintf(out, "kedge dev: new Slack signing secret in %s (sign test requests with it, or set $%s to your Slack app's)\n", path, envSigningSecret)
	}
	return signingSecret(path)
}

// startDevWebhook starts `kedge dev`'s webhook server beside its worker;
// it stops when ctx ends.
func startDevWebhook(ctx context.Context, o DevOptions, cfg *chatops.Config, cl client.Client, dc converter.DataConverter, uiURL string, out io.Writer) error {
	if o.WebhookAddress == "" {
		return nil
	}
	dir := o.DataDir
	if dir == "" {
		dir = "."
	}
	secret, err := devSigningSecret(o.SlackSigningSecretFile, dir, out)
	if err != nil {
		return failed("dev: %v", err)
	}
	ln, err := net.Listen("tcp", o.WebhookAddress)
	if err != nil {
		return failed("dev: webhook: %v", err)
	}
	srv := &chatops.Server{
		Config: cfg, Client: cl, DataConverter: dc, SigningSecret: secret,
		UIURL: uiURL, Namespace: o.Namespace, TaskQueue: o.TaskQueue,
		Logger: slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	go func() { _ = srv.Serve(ctx, ln) }()
	fmt.Fprintf(out, "kedge dev: webhook http://%s (Slack: /slack/commands, /slack/interactive; CI: POST /hooks/run)\n", ln.Addr())
	if o.WebhookConfig == "" {
		fmt.Fprintf(out, "kedge dev: no --webhook-config: the webhook refuses every request (see the README's ChatOps section)\n")
	}
	return nil
}

// devWebhookConfig loads the dev webhook's config (empty without one):
// the worker beside it posts to the response URLs it allows.
func devWebhookConfig(o DevOptions) (*chatops.Config, error) {
	if o.WebhookAddress == "" || o.WebhookConfig == "" {
		return chatops.EmptyConfig(), nil
	}
	cfg, err := chatops.LoadConfig(o.WebhookConfig)
	if err != nil {
		return nil, failed("dev: invalid webhook config:\n%v", err)
	}
	return cfg, nil
}
