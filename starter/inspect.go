package starter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/workflows"
)

// HostReport is what `kedge inspect` found on one inventory node.
type HostReport = workflows.HostReport

// APINode is a Node as the API server reports it.
type APINode = workflows.APINode

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "read each inventory host's layout (kedge, typhoon-flatcar, typhoon-fcos, none, unknown) over SSH, and its Node in the API",
		Description: "inspect runs on the worker like every runbook: the worker connects to the hosts with its own inventory's\n" +
			"SSH settings (host keys verified, become as configured; a node's site queue reaches it), reads what systemd\n" +
			"and the kubelet's files say, and changes nothing. It exits non-zero when a host cannot be read or has a\n" +
			"layout Kedge does not operate.",
		Flags: append([]cli.Flag{inventoryFlag, outputFlag,
			&cli.StringSliceFlag{Name: "node", Usage: "inspect only this `NODE` (repeatable)"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "give up after this long"},
		}, temporalFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usageError("inspect takes no arguments, got %q", c.Args().Slice())
			}
			if c.String("inventory") == "" {
				return usageError("inspect needs --inventory FILE")
			}
			cluster, err := inventory.LoadFile(c.String("inventory"))
			if err != nil {
				return failed("invalid inventory:\n%v", err)
			}
			names := c.StringSlice("node")
			for _, n := range names {
				if _, ok := cluster.Node(n); !ok {
					return usageError("--node %s is not in the inventory", n)
				}
			}
			if len(names) == 0 {
				for _, n := range cluster.Nodes() {
					names = append(names, n.Name)
				}
			}
			reports, err := inspectOnWorker(c, cluster, names)
			if err != nil {
				return err
			}
			if jsonOutput(c) {
				if err := writeJSON(c.App.Writer, reports); err != nil {
					return err
				}
			} else {
				printReports(c, reports)
			}
			var bad []string
			for _, r := range reports {
				if r.Error != "" || r.Layout == nil || r.Layout.Kind == layout.KindUnknown {
					bad = append(bad, r.Node)
				}
			}
			if len(bad) > 0 {
				return failed("%s: not readable or not a layout Kedge operates", strings.Join(bad, ", "))
			}
			return nil
		},
	}
}

// inspectOnWorker runs the inspect workflow and waits for its reports.
func inspectOnWorker(c *cli.Context, cluster *inventory.Cluster, names []string) ([]HostReport, error) {
	cl, err := dial(c)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	id := workflows.InspectWorkflowID(cluster.Name, time.Now().UTC().Format("20060102-150405")+"-"+hex.EncodeToString(b))
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                c.String("task-queue"),
		WorkflowExecutionTimeout: c.Duration("timeout"),
		StaticSummary:            fmt.Sprintf("inspect %d hosts of %s", len(names), cluster.Name),
	}, workflows.InspectWorkflow, workflows.InspectInput{Cluster: *cluster, Nodes: names, Admission: workflows.Admission{IssuedAt: time.Now().UTC()}})
	if err != nil {
		return nil, failed("start inspect: %v", err)
	}
	if !jsonOutput(c) {
		fmt.Fprintf(c.App.ErrWriter, "kedge: inspecting %d hosts of %s on the worker: %s\n", len(names), cluster.Name, workflowURL(c, run.GetID(), run.GetRunID()))
	}
	var res workflows.InspectResult
	if err := run.Get(ctx, &res); err != nil {
		return nil, failed("inspect %s: %s", id, errorMessage(err))
	}
	return res.Hosts, nil
}

func errorMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%s (%s)", ae.Message(), ae.Type())
	}
	return err.Error()
}

func printReports(c *cli.Context, reports []HostReport) {
	w := tabwriter.NewWriter(c.App.Writer, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tLAYOUT\tROLE\tNODE NAME\tAPI\tRUNTIME\tKUBELET IMAGE\tETCD\tCLUSTER DNS")
	for _, r := range reports {
		if r.Layout == nil {
			fmt.Fprintf(w, "%s\terror\t-\t-\t-\t-\t-\t-\t-\n", r.Node)
			continue
		}
		l := r.Layout
		api := "-"
		if r.API != nil {
			switch {
			case !r.API.Found:
				api = "no Node"
			case r.API.Ready:
				api = "Ready " + r.API.KubeletVersion
			default:
				api = "NotReady " + r.API.KubeletVersion
			}
		}
		runtime, image := "-", "-"
		if k := l.Kubelet; k != nil {
			runtime, image = dash(k.Runtime), dash(k.Image)
		}
		etcd := l.Etcd.Mode
		if l.Etcd.Name != "" {
			etcd += " (" + l.Etcd.Name + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, l.Kind, dash(l.Role), dash(l.NodeName), api, runtime, image, etcd, dash(strings.Join(l.ClusterDNS, ",")))
	}
	w.Flush()
	for _, r := range reports {
		switch {
		case r.Error != "":
			fmt.Fprintf(c.App.Writer, "%s: %s\n", r.Node, r.Error)
		case r.Layout.Kind == layout.KindUnknown:
			fmt.Fprintf(c.App.Writer, "%s: unknown layout: %s\n", r.Node, r.Layout.Why)
		case r.Layout.Kubelet != nil && r.Layout.Kubelet.ImageInEffect != r.Layout.Kubelet.Image:
			fmt.Fprintf(c.App.Writer, "%s: %s sets KUBELET_IMAGE=%s but systemd still uses %s (no daemon-reload since)\n",
				r.Node, r.Layout.Kubelet.ImageFrom, r.Layout.Kubelet.Image, r.Layout.Kubelet.ImageInEffect)
		}
		if r.NodeNameMismatch != "" {
			fmt.Fprintln(c.App.Writer, r.NodeNameMismatch)
		}
		if r.APIError != "" {
			fmt.Fprintf(c.App.Writer, "%s: the API server: %s\n", r.Node, r.APIError)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
