// Command kedge-temporal is the Temporal server of Kedge's team install:
// Temporal's own server at the version go.mod pins, configured as the
// official image's temporal-server is (its embedded config template
// rendered from the environment, or --config-file), with one difference:
// every call to the frontend is authorized by the role its client
// certificate carries (internal/temporalauth; `kedge setup tls` makes the
// certificates). deploy/temporal/Dockerfile puts it where the official
// image has temporal-server, so the image's entrypoint starts it.
//
//	kedge-temporal start [--config-file FILE] [--service NAME]...
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // the team install's database
	"go.temporal.io/server/temporal"

	"kedge.dev/kedge/internal/temporalauth"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kedge-temporal:", err)
		os.Exit(1)
	}
}

type services []string

func (s *services) String() string     { return fmt.Sprint(*s) }
func (s *services) Set(v string) error { *s = append(*s, v); return nil }

func run(args []string) error {
	if len(args) == 0 || args[0] != "start" {
		return errors.New("usage: kedge-temporal start [--config-file FILE] [--service NAME, repeatable]")
	}
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	file := fs.String("config-file", os.Getenv(config.EnvKeyConfigFile), "server config `FILE` (default: the embedded template, from the environment)")
	var svc services
	fs.Var(&svc, "service", "a service to run, repeatable (default: all)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if len(svc) == 0 {
		svc = temporal.DefaultServices
	}
	opt := config.WithEmbedded()
	if *file != "" {
		opt = config.WithConfigFile(*file)
	}
	cfg, err := config.Load(opt)
	if err != nil {
		return fmt.Errorf("load the configuration: %w", err)
	}
	// Roles come from client certificates: a frontend that does not
	// require one would let every caller in with none, refused all.
	if !cfg.Global.TLS.Frontend.Server.RequireClientAuth {
		return errors.New("the frontend must require client certificates (TEMPORAL_TLS_REQUIRE_CLIENT_AUTH=true): roles are read from them")
	}
	audit := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	s, err := temporal.NewServer(
		temporal.ForServices(svc),
		temporal.WithConfig(cfg),
		temporal.WithLogger(log.NewZapLogger(log.BuildZapLogger(cfg.Log))),
		temporal.InterruptOn(temporal.InterruptCh()),
		temporal.WithAuthorizer(&temporalauth.Authorizer{Logger: audit}),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return temporalauth.ClaimMapper{} }),
	)
	if err != nil {
		return fmt.Errorf("build the server: %w", err)
	}
	return s.Start() // blocks until SIGINT or SIGTERM
}
