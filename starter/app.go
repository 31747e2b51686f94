package starter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"go.temporal.io/api/serviceerror"
)

// Exit codes.
const (
	ExitFailed      = 1
	ExitUsage       = 2
	ExitUnreachable = 3
)

// IO holds the streams a command uses.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// StdIO is the process's own streams.
func StdIO() IO { return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// NewApp builds the kedge command line.
func NewApp(stdio IO) *cli.App {
	app := &cli.App{
		Name:      "kedge",
		Usage:     "run Kubernetes cluster runbooks durably on Temporal",
		Reader:    stdio.In,
		Writer:    stdio.Out,
		ErrWriter: stdio.Err,
		Commands: []*cli.Command{
			validateCommand(),
			inspectCommand(),
			planCommand(),
			runCommand(),
			rerunCommand(),
			watchCommand(),
			listCommand(),
			cancelCommand(),
			approveCommand(),
			actionsCommand(),
			workerCommand(),
			devCommand(),
			scheduleCommand(),
			codecCommand(),
			codecServerCommand(),
			setupCommand(),
			webhookCommand(),
			fleetLockCommand(),
		},
		ExitErrHandler: func(c *cli.Context, err error) {},
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			return cli.Exit(fmt.Sprintf("kedge: %v (see kedge %s --help)", err, c.Command.Name), ExitUsage)
		},
		HideHelpCommand: true,
	}
	return app
}

// Main runs the app and returns the process exit code.
func Main(args []string, stdio IO) int {
	return MainContext(context.Background(), args, stdio)
}

// MainContext is Main with a context: a command that waits (run --wait,
// watch, approve) ends when ctx does.
func MainContext(ctx context.Context, args []string, stdio IO) int {
	app := NewApp(stdio)
	err := app.RunContext(ctx, interspersed(app, args))
	if err == nil {
		return 0
	}
	var exit cli.ExitCoder
	if errors.As(err, &exit) {
		if msg := exit.Error(); msg != "" {
			fmt.Fprintln(stdio.Err, msg)
		}
		return exit.ExitCode()
	}
	fmt.Fprintf(stdio.Err, "kedge: %v\n", err)
	// third-party message: urfave/cli (and the standard flag package under
	// it) report usage errors as text only.
	if strings.Contains(err.Error(), "flag provided but not defined") || strings.Contains(err.Error(), "Required flag") {
		return ExitUsage
	}
	return ExitFailed
}

var outputFlag = &cli.StringFlag{
	Name:    "output",
	Aliases: []string{"o"},
	Usage:   "text or json",
	Value:   "text",
	Action: func(c *cli.Context, v string) error {
		if v != "text" && v != "json" {
			return cli.Exit(fmt.Sprintf("kedge: --output must be text or json, got %q", v), ExitUsage)
		}
		return nil
	},
}

func jsonOutput(c *cli.Context) bool { return c.String("output") == "json" }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func usageError(format string, args ...any) error {
	return cli.Exit("kedge: "+fmt.Sprintf(format, args...), ExitUsage)
}

func failed(format string, args ...any) error {
	return cli.Exit("kedge: "+fmt.Sprintf(format, args...)+deniedBecause(args), ExitFailed)
}

// deniedBecause is why Temporal refused a call, when one of args is its
// refusal: the server's authorizer puts the reason (the certificate's
// role and the call) beside the bare "Request unauthorized.".
func deniedBecause(args []any) string {
	for _, a := range args {
		err, ok := a.(error)
		if !ok {
			continue
		}
		var pd *serviceerror.PermissionDenied
		// third-party message: Temporal's PermissionDenied may or may not
		// repeat its reason in its text.
		if errors.As(err, &pd) && pd.Reason != "" && !strings.Contains(err.Error(), pd.Reason) {
			return " (" + pd.Reason + ")"
		}
	}
	return ""
}
