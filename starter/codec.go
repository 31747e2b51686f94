package starter

import (
	"bytes"
	"context"
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
		}},
	}
}

func codecServerCommand() *cli.Command {
	return &cli.Command{
		Name:  "codec-server",
		Usage: "serve the Temporal Web UI's remote codec so operators see decoded payloads",
		Flags: []cli.Flag{
			codecKeyFlag,
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8234", Usage: "`HOST:PORT` to listen on"},
			&cli.StringSliceFlag{Name: "ui-origin", Value: cli.NewStringSlice("http://127.0.0.1:8233"), Usage: "Web UI `ORIGIN` allowed to call it (repeatable)"},
			&cli.StringSliceFlag{Name: "host", Usage: "`HOST:PORT` browsers reach it as (repeatable; default: the listen address when it is loopback, else any)"},
			&cli.StringFlag{Name: "token-file", Usage: "`FILE` (owner-only) with a token every request must carry as `Authorization: Bearer TOKEN`, e.g. added by an authenticating proxy in front", EnvVars: []string{"KEDGE_CODEC_TOKEN_FILE"}},
		},
		Action: func(c *cli.Context) error {
			cd, err := loadCodec(codecKeyPath(c))
			if err != nil {
				return err
			}
			var token []byte
			if f := c.String("token-file"); f != "" {
				data, err := secretfile.Read(f)
				if err != nil {
					return usageError("codec-server: --token-file: %v", err)
				}
				if token = bytes.TrimSpace(data); len(token) < 16 {
					return usageError("codec-server: --token-file %s: the token must be at least 16 characters", f)
				}
			}
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return failed("codec-server: %v", err)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(c.App.ErrWriter, "kedge codec-server on http://%s (key %s); set it as the Web UI's codec endpoint\n", ln.Addr(), cd.ActiveKey())
			hosts := c.StringSlice("host")
			if len(hosts) == 0 {
				hosts = codec.LoopbackHosts(ln.Addr().String())
			}
			return serveCodec(ctx, ln, cd, c.StringSlice("ui-origin"), hosts, token)
		},
	}
}

// serveCodec serves the codec endpoint on ln until ctx ends; with a
// token, only to requests that carry it.
func serveCodec(ctx context.Context, ln net.Listener, cd *codec.Codec, origins, hosts []string, token []byte) error {
	h := cd.Handler(origins, hosts)
	if token != nil {
		h = codec.RequireToken(token, h)
	}
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
