package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

// setupCommand prepares a shared Temporal namespace for Kedge: its search
// attributes, which `kedge dev` registers on its own server.
func setupCommand() *cli.Command {
	return &cli.Command{
		Name:        "setup",
		Usage:       "register Kedge's search attributes (KedgeCluster, KedgeRunbook, KedgeNode, KedgeStatus) on a Temporal namespace; once per namespace",
		Subcommands: []*cli.Command{setupTLSCommand()},
		Flags: append([]cli.Flag{outputFlag,
			&cli.BoolFlag{Name: "check", Usage: "only check: exit 1 when an attribute is missing"},
			&cli.BoolFlag{Name: "create-namespace", Usage: "create the namespace first when the server has none of that name"},
			&cli.DurationFlag{Name: "retention", Value: 30 * 24 * time.Hour, Usage: "how long a created namespace keeps closed runs"},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			cl, err := dial(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			ns := c.String("namespace")
			ctx, cancel := context.WithTimeout(c.Context, time.Minute)
			defer cancel()
			created := false
			if c.Bool("create-namespace") && !c.Bool("check") {
				if created, err = ensureNamespace(ctx, cl.WorkflowService(), ns, c.Duration("retention")); err != nil {
					return failed("namespace %s: %v", ns, err)
				}
				if created {
					fmt.Fprintf(c.App.ErrWriter, "namespace %s: created, keeping closed runs %s\n", ns, c.Duration("retention"))
				}
			}
			var added, missing []string
			if c.Bool("check") {
				missing, err = searchattr.Missing(ctx, cl.OperatorService(), ns, searchattr.Definitions())
			} else {
				added, err = ensureAttributes(ctx, cl.OperatorService(), ns)
			}
			if err != nil {
				return setupError(ns, err)
			}
			if jsonOutput(c) {
				if err := writeJSON(c.App.Writer, map[string]any{"namespace": ns, "created": created, "attributes": searchattr.Names(), "added": nonNilSlice(added), "missing": nonNilSlice(missing)}); err != nil {
					return err
				}
			} else {
				switch {
				case len(missing) > 0:
					fmt.Fprintf(c.App.Writer, "namespace %s lacks %s: run `kedge setup`\n", ns, strings.Join(missing, ", "))
				case len(added) > 0:
					fmt.Fprintf(c.App.Writer, "namespace %s: added %s (Keyword); the server may take a few seconds to use them\n", ns, strings.Join(added, ", "))
				default:
					fmt.Fprintf(c.App.Writer, "namespace %s has Kedge's search attributes: %s\n", ns, strings.Join(searchattr.Names(), ", "))
				}
			}
			if len(missing) > 0 {
				return cli.Exit("", ExitFailed)
			}
			return nil
		},
	}
}

// ensureNamespace registers ns unless the server has it.
func ensureNamespace(ctx context.Context, ws workflowservice.WorkflowServiceClient, ns string, retention time.Duration) (bool, error) {
	if retention < 24*time.Hour {
		return false, fmt.Errorf("--retention %s: Temporal keeps closed runs at least a day", retention)
	}
	_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	var notFound *serviceerror.NamespaceNotFound
	if err == nil || !errors.As(err, &notFound) {
		return false, err
	}
	_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        ns,
		Description:                      "Kedge runbooks",
		WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if errors.As(err, &exists) {
		return false, nil
	}
	return err == nil, err
}

// ensureAttributes adds Kedge's search attributes; a namespace just
// created is unknown to the server's caches for a few seconds, so
// NamespaceNotFound is retried until ctx ends.
func ensureAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, ns string) ([]string, error) {
	for {
		added, err := searchattr.Ensure(ctx, op, ns, searchattr.Definitions())
		var notFound *serviceerror.NamespaceNotFound
		if err == nil || !errors.As(err, &notFound) {
			return added, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func setupError(ns string, err error) error {
	var denied *serviceerror.PermissionDenied
	var unimpl *serviceerror.Unimplemented
	switch {
	case errors.Is(err, searchattr.ErrWrongType):
		return failed("namespace %s: %v; remove or rename that attribute", ns, err)
	case errors.As(err, &denied), errors.As(err, &unimpl):
		return failed("namespace %s: %v\n(registering search attributes needs Temporal's operator service with admin rights; on Temporal Cloud add them as Keyword with `tcld namespace search-attributes add`: %s)",
			ns, err, strings.Join(searchattr.Names(), ", "))
	}
	return failed("setup of namespace %s: %v", ns, err)
}

// startRunbook starts a runbook run from the CLI (run and rerun): refused
// beside an open run of the runbook on the cluster, then started as every
// front door starts one (runs.Start).
func startRunbook(c *cli.Context, cl client.Client, id, taskQueue string, in workflows.RunbookInput) (client.WorkflowRun, error) {
	if err := refuseBusy(c, cl, in.Runbook.Name, in.Cluster.Name); err != nil {
		return nil, err
	}
	run, err := runs.Start(c.Context, cl, runs.StartOptions{ID: id, TaskQueue: taskQueue}, in, time.Now())
	if err != nil {
		return nil, startError(c, id, err)
	}
	return run, nil
}

// startError explains a refused start; a namespace without Kedge's search
// attributes gets told how to add them.
func startError(c *cli.Context, id string, err error) error {
	if searchattr.IsMissing(err) {
		return missingAttributes(c, err)
	}
	return failed("start %s: %v", id, err)
}

func missingAttributes(c *cli.Context, err error) error {
	return failed("namespace %s on %s lacks Kedge's search attributes (%s): run `kedge setup` once for the namespace (`kedge dev` has them)\n(the server said: %v)",
		c.String("namespace"), c.String("address"), strings.Join(searchattr.Names(), ", "), err)
}
