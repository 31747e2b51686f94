package starter

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kedge.dev/kedge/internal/mtls"
	"kedge.dev/kedge/workflows"
)

// setupTLSCommand makes the certificates of a team's mutual-TLS Temporal.
func setupTLSCommand() *cli.Command {
	return &cli.Command{
		Name:  "tls",
		Usage: "make the CA and certificates for Temporal with mutual TLS: a server certificate and one client certificate per program or person, each with its role; existing files are kept",
		Description: "Run it once in the operator's directory (the compose install reads $KEDGE_DIR/tls), again to add a client.\n" +
			"Each client certificate carries a role, which Kedge's Temporal server authorizes every call by:\n" +
			"  operator  start, signal, approve, cancel, reset and terminate runs, schedules; read\n" +
			"  viewer    read only: list, describe, history, query (the Web UI's certificate)\n" +
			"  worker    poll its --task-queue queues and answer their tasks; read\n" +
			"  site      a site's worker: poll the activity tasks of its --site-queue queues and answer them; read; never a workflow task\n" +
			"  admin     everything: namespaces, search attributes (kedge setup, the temporal CLI)\n" +
			"The default clients have theirs (kedge-worker worker, kedge-webhook operator, kedge-setup admin,\n" +
			"temporal-ui viewer, temporal-admin admin, operator, viewer); name another as NAME:ROLE, e.g. --client alice:operator.\n" +
			"Clients then dial with TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH\n" +
			"and TEMPORAL_TLS_SERVER_NAME (or --tls-cert-path, --tls-key-path, --tls-ca-path, --tls-server-name).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: "tls", Usage: "`DIR` to write into"},
			&cli.StringFlag{Name: "server-name", Value: "temporal", Usage: "the frontend's `NAME` as clients dial it (with localhost and loopback)"},
			&cli.StringSliceFlag{Name: "host", Usage: "another `NAME|IP` of the frontend, repeatable"},
			&cli.StringSliceFlag{Name: "client", Value: cli.NewStringSlice(mtls.DefaultClients...), Usage: "client certificate `NAME[:ROLE]` (NAME is its CN; ROLE operator, viewer, worker or admin), repeatable"},
			&cli.StringSliceFlag{Name: "task-queue", Value: cli.NewStringSlice(workflows.DefaultTaskQueue), Usage: "task `QUEUE` the worker certificates made by this run may poll, repeatable"},
			&cli.StringSliceFlag{Name: "site-queue", Usage: "task `QUEUE` whose activity tasks the site certificates (role site) made by this run may poll, repeatable (e.g. --client lyon-1:site --site-queue lyon)"},
			&cli.DurationFlag{Name: "valid", Value: 365 * 24 * time.Hour, Usage: "life of the server and client certificates"},
			outputFlag,
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError("setup tls takes no arguments, got %q", c.Args().First())
			}
			res, err := mtls.Generate(mtls.Options{Dir: c.String("out"), ServerName: c.String("server-name"),
				Hosts: c.StringSlice("host"), Clients: c.StringSlice("client"), TaskQueues: c.StringSlice("task-queue"), SiteQueues: c.StringSlice("site-queue"), Valid: c.Duration("valid")})
			if err != nil {
				return failed("setup tls: %v", err)
			}
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, res)
			}
			for _, f := range res.Files {
				what := "kept   "
				if f.Written {
					what = "wrote  "
				}
				switch {
				case f.Role == mtls.RoleWorker:
					fmt.Fprintf(c.App.Writer, "%s%s (worker of %s)\n", what, f.Path, strings.Join(f.TaskQueues, ", "))
				case f.Role == mtls.RoleSite:
					fmt.Fprintf(c.App.Writer, "%s%s (site worker: the activities of %s)\n", what, f.Path, strings.Join(f.TaskQueues, ", "))
				case f.Role != "":
					fmt.Fprintf(c.App.Writer, "%s%s (%s)\n", what, f.Path, f.Role)
				default:
					fmt.Fprintln(c.App.Writer, what+f.Path)
				}
			}
			dir := c.String("out")
			fmt.Fprintf(c.App.Writer, "new certificates are good until %s; a client dials with:\n", res.NotAfter.Format("2006-01-02"))
			fmt.Fprintf(c.App.Writer, "  TEMPORAL_TLS_CLIENT_CERT_PATH=%s TEMPORAL_TLS_CLIENT_KEY_PATH=%s \\\n  TEMPORAL_TLS_SERVER_CA_CERT_PATH=%s TEMPORAL_TLS_SERVER_NAME=%s\n",
				filepath.Join(dir, "operator.pem"), filepath.Join(dir, "operator.key"), res.CA, c.String("server-name"))
			return nil
		},
	}
}
