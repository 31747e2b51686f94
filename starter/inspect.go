package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/activities/host"
	"kedge.dev/kedge/activities/kube"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/activities/vault"
	"kedge.dev/kedge/internal/layout"
	"kedge.dev/kedge/runbooks/inventory"
)

// HostReport is what `kedge inspect` found on one inventory node.
type HostReport struct {
	Node   string         `json:"node"`
	Layout *layout.Layout `json:"layout,omitempty"`
	// API is the Node the kubelet registers as, as the API server knows
	// it (when the inventory has a kubeconfig).
	API *APINode `json:"api,omitempty"`
	// NodeNameMismatch says why runbooks would refuse the host: its
	// kubelet registers another Node name than the inventory gives it
	// (layout.CheckNodeName).
	NodeNameMismatch string `json:"nodeNameMismatch,omitempty"`
	Error            string `json:"error,omitempty"`
}

// APINode is a Node as the API server reports it.
type APINode struct {
	Name           string `json:"name"`
	Found          bool   `json:"found"`
	Ready          bool   `json:"ready"`
	KubeletVersion string `json:"kubeletVersion,omitempty"`
	InternalIP     string `json:"internalIP,omitempty"`
}

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "read each inventory host's layout (kedge, typhoon-flatcar, typhoon-fcos, none, unknown) over SSH, and its Node in the API",
		Description: "inspect connects to the hosts from where it runs, with the inventory's SSH settings (host keys verified,\n" +
			"become as configured), reads what systemd and the kubelet's files say, and changes nothing.\n" +
			"It exits non-zero when a host cannot be read or has a layout Kedge does not operate.",
		Flags: []cli.Flag{inventoryFlag, outputFlag,
			&cli.StringSliceFlag{Name: "node", Usage: "inspect only this `NODE` (repeatable)"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "give up on a host after this long"},
		},
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
			ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
			defer cancel()
			reports := inspectHosts(ctx, cluster, names)
			if cluster.Kubernetes.Kubeconfig != "" {
				if err := addAPINodes(ctx, cluster.Kubernetes, reports); err != nil {
					fmt.Fprintf(c.App.ErrWriter, "kedge: the API server: %v\n", err)
				}
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

// inspectHosts reads every host's layout, a few at a time.
func inspectHosts(ctx context.Context, cluster *inventory.Cluster, names []string) []HostReport {
	pool := sshpool.New(sshpool.Options{Signers: (&vault.Activities{}).SSHSigners})
	defer pool.Close()
	acts := &host.Activities{Pool: pool}
	reports := make([]HostReport, len(names))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, name := range names {
		reports[i].Node = name
		t, err := cluster.Target(name)
		if err != nil {
			reports[i].Error = err.Error()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			l, err := acts.Layout(ctx, host.LayoutInput{Target: t})
			if err != nil {
				reports[i].Error = errorMessage(err)
				return
			}
			reports[i].Layout = &l
			if err := l.CheckNodeName(name, cluster.KubeName(name)); err != nil {
				reports[i].NodeNameMismatch = err.Error()
			}
		}()
	}
	wg.Wait()
	return reports
}

func errorMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%s (%s)", ae.Message(), ae.Type())
	}
	return err.Error()
}

// addAPINodes looks each host's Node up by the name its kubelet
// registers with. The kubeconfig is loaded as the worker loads it
// (kube.LoadConfig: no exec plugin, token file or file outside its
// directory), as the same file serves both.
func addAPINodes(ctx context.Context, k inventory.Kubernetes, reports []HostReport) error {
	cfg, err := kube.LoadConfig(k.Kubeconfig, k.Context)
	if err != nil {
		return err
	}
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes := map[string]corev1.Node{}
	for _, n := range list.Items {
		nodes[n.Name] = n
	}
	for i := range reports {
		l := reports[i].Layout
		if l == nil || l.NodeName == "" {
			continue
		}
		a := &APINode{Name: l.NodeName}
		if n, ok := nodes[l.NodeName]; ok {
			a.Found, a.KubeletVersion = true, n.Status.NodeInfo.KubeletVersion
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					a.Ready = c.Status == corev1.ConditionTrue
				}
			}
			for _, ad := range n.Status.Addresses {
				if ad.Type == corev1.NodeInternalIP {
					a.InternalIP = ad.Address
				}
			}
		}
		reports[i].API = a
	}
	return nil
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
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
