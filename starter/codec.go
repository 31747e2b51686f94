package starter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/secretfile"
)

var codecKeyFlag = &cli.StringFlag{Name: "codec-key", Usage: "payload encryption key `FILE` (default: " + codec.DefaultPath() + ")", EnvVars: []string{codec.EnvKeyFile}}

func codecKeyPath(c *cli.Context) string {
	if p := c.String("codec-key"); p != "" {
		return p
	}
	return codec.DefaultPath()
}

// loadCodec loads the key file every client and worker seals payloads
// with; without one nothing is started, since secrets would reach
// Temporal's history in plain text.
func loadCodec(path string) (*codec.Codec, error) {
	cd, err := codec.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cli.Exit(fmt.Sprintf("kedge: no payload encryption key at %s: create one with `kedge codec keygen --out %s` (kedge dev makes one), share it with the workers, and keep it secret", path, path), ExitUsage)
	}
	if err != nil {
		return nil, cli.Exit("kedge: "+err.Error(), ExitUsage)
	}
	return cd, nil
}

func codecCommand() *cli.Command {
	return &cli.Command{
		Name:  "codec",
		Usage: "manage the key that encrypts runbook inputs, outputs and errors in Temporal",
		Subcommands: []*cli.Command{{
			Name:  "keygen",
			Usage: "write a new key file (mode 0600); refuses to overwrite one",
			Flags: []cli.Flag{&cli.StringFlag{Name: "out", Usage: "key `FILE`", Value: codec.DefaultPath()}, outputFlag},
			Action: func(c *cli.Context) error {
				id, err := codec.Generate(c.String("out"))
				if err != nil {
					return failed("%v", err)
				}
				if jsonOutput(c) {
					return writeJSON(c.App.Writer, map[string]string{"file": c.String("out"), "keyId": id})
				}
				fmt.Fprintf(c.App.Writer, "key %s written to %s\n", id, c.String("out"))
				return nil
			},
		}, {
			Name:  "derive",
			Usage: "write a site worker's key file (mode 0600): the keys of one task queue, derived from the full key file; its worker runs that queue's activities and nothing else",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "codec-key", Usage: "the full key `FILE` (default: $KEDGE_CODEC_KEY, else the user config directory's)", EnvVars: []string{codec.EnvKeyFile}},
				&cli.StringFlag{Name: "queue", Usage: "the site's task `QUEUE`", Required: true},
				&cli.StringFlag{Name: "out", Usage: "key `FILE` to write; refuses to overwrite one", Required: true},
				outputFlag,
			},
			Action: func(c *cli.Context) error {
				full, err := loadCodec(codecKeyPath(c))
				if err != nil {
					return err
				}
				if err := codec.CheckQueueName(c.String("queue")); err != nil {
					return usageError("--queue: %v", err)
				}
				if err := writeQueueKeys(full, c.String("queue"), c.String("out")); err != nil {
					return failed("codec derive: %v", err)
				}
				if jsonOutput(c) {
					return writeJSON(c.App.Writer, map[string]string{"file": c.String("out"), "queue": c.String("queue")})
				}
				fmt.Fprintf(c.App.Writer, "task queue %s's keys written to %s: give it to that site's worker (kedge worker --task-queue %s --codec-key %s)\n",
					c.String("queue"), c.String("out"), c.String("queue"), c.String("out"))
				return nil
			},
		}, {
			Name:  "token",
			Usage: "write a new token for `kedge codec-server --token-file` (mode 0600); refuses to overwrite one",
			Flags: []cli.Flag{&cli.StringFlag{Name: "out", Usage: "token `FILE`", Required: true}, outputFlag},
			Action: func(c *cli.Context) error {
				if err := writeToken(c.String("out")); err != nil {
					return failed("codec token: %v", err)
				}
				if jsonOutput(c) {
					return writeJSON(c.App.Writer, map[string]string{"file": c.String("out")})
				}
				fmt.Fprintf(c.App.Writer, "codec server token written to %s\n", c.String("out"))
				return nil
			},
		}},
	}
}

// writeQueueKeys writes queue's key file at path, owner-only, never over
// a file.
func writeQueueKeys(full *codec.Codec, queue, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := full.WriteQueueKeys(f, queue); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// writeToken writes a new random codec server token to path, owner-only;
// it never overwrites a file.
func writeToken(path string) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(hex.EncodeToString(b) + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readToken reads a codec server token file (owner-only, at least
// codec.MinTokenBytes).
func readToken(path string) ([]byte, error) {
	data, err := secretfile.Read(path)
	if err != nil {
		return nil, err
	}
	token := bytes.TrimSpace(data)
	if len(token) < codec.MinTokenBytes {
		return nil, fmt.Errorf("%s: the token must be at least %d characters (make one with `kedge codec token --out %s`)", path, codec.MinTokenBytes, path)
	}
	return token, nil
}

func codecServerCommand() *cli.Command {
	return &cli.Command{
		Name:  "codec-server",
		Usage: "serve the Temporal Web UI's remote codec so operators see decoded payloads",
		Flags: []cli.Flag{
			codecKeyFlag,
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8234", Usage: "`HOST:PORT` to listen on"},
			&cli.StringSliceFlag{Name: "ui-origin", Value: cli.NewStringSlice("http://127.0.0.1:8233"), Usage: "Web UI `ORIGIN` allowed to call it (repeatable; the first is where a login returns to)"},
			&cli.StringSliceFlag{Name: "host", Usage: "`HOST:PORT` browsers reach it as (repeatable; default: the listen address when it is loopback, else any)"},
			&cli.StringFlag{Name: "token-file", Usage: "`FILE` (owner-only; `kedge codec token` makes one) with the token a request needs: as `Authorization: Bearer TOKEN` (the CLI, an authenticating proxy), or pasted once at /login by a browser, which then holds a session cookie of its own for 30 days (POST /logout ends it)", EnvVars: []string{"KEDGE_CODEC_TOKEN_FILE"}},
			&cli.TimestampFlag{Name: "sessions-not-before", Layout: time.RFC3339, Usage: "refuse browser sessions logged in before `TIME` (RFC 3339): every browser logs in again, the token stays (a cookie that may have leaked; also after a restart, which forgets logouts)", EnvVars: []string{"KEDGE_CODEC_SESSIONS_NOT_BEFORE"}},
		},
		Action: func(c *cli.Context) error {
			f := c.String("token-file")
			if f == "" {
				return usageError("codec-server: --token-file is required: whoever reaches a codec server without a token reads every payload (make one with `kedge codec token --out FILE`)")
			}
			token, err := readToken(f)
			if err != nil {
				return usageError("codec-server: --token-file: %v", err)
			}
			cd, err := loadCodec(codecKeyPath(c))
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return failed("codec-server: %v", err)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			hosts := c.StringSlice("host")
			if len(hosts) == 0 {
				hosts = codec.LoopbackHosts(ln.Addr().String())
			}
			opts := codec.EndpointOptions{Token: token, Origins: c.StringSlice("ui-origin"), Hosts: hosts}
			if t := c.Timestamp("sessions-not-before"); t != nil {
				opts.SessionsNotBefore = *t
			}
			h, err := cd.Endpoint(opts)
			if err != nil {
				return usageError("codec-server: %v", err)
			}
			fmt.Fprintf(c.App.ErrWriter, "kedge codec-server on http://%s (key %s); set it as the Web UI's codec endpoint, with includeCredentials; browsers log in at /login with the token in %s\n", ln.Addr(), cd.ActiveKey(), f)
			return serveCodec(ctx, ln, h)
		},
	}
}

// serveCodec serves the codec endpoint h on ln until ctx ends.
func serveCodec(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return failed("codec-server: %v", err)
	}
	return nil
}
