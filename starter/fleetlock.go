package starter

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"kedge.dev/kedge/chatops"
	"kedge.dev/kedge/fleetlock"
	"kedge.dev/kedge/runbooks/inventory"
)

// fleetLockNode is one node's FleetLock client settings.
type fleetLockNode struct {
	Node     string `json:"node"`
	ClientID string `json:"clientId,omitempty"`
	// BaseURL is Zincati's [updates.fleet_lock] base_url: it carries the
	// node's token, so it is a credential of that node.
	BaseURL string `json:"baseUrl"`
}

// fleetLockCommand prints the FleetLock base URL of a cluster's nodes,
// for their Zincati configuration: each carries its node's token,
// derived from the cluster's key in the webhook config.
func fleetLockCommand() *cli.Command {
	return &cli.Command{
		Name:      "fleetlock-url",
		Usage:     "print the FleetLock base_url (with its token) of a cluster's nodes for Zincati's [updates.fleet_lock]",
		ArgsUsage: "CLUSTER [NODE ...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the webhook's authorization config `FILE` (kind: ChatOps), whose clusters.CLUSTER.fleetLock.keyFile holds the key", EnvVars: []string{envWebhookConfig}},
			&cli.StringFlag{Name: "public-url", Usage: "the webhook server's `URL` as the nodes reach it, e.g. https://kedge.example:8235"},
			outputFlag,
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.String("config") == "" || c.String("public-url") == "" {
				return usageError("fleetlock-url needs --config FILE, --public-url URL and a CLUSTER")
			}
			u, err := url.Parse(c.String("public-url"))
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return usageError("--public-url %q is not an http(s) URL", c.String("public-url"))
			}
			cfg, err := chatops.LoadConfig(c.String("config"))
			if err != nil {
				return failed("invalid webhook config:\n%v", err)
			}
			name := c.Args().First()
			fc, ok := cfg.FleetLock[name]
			if !ok {
				return failed("%s: cluster %s has no fleetLock section", cfg.File, name)
			}
			cluster, err := inventory.LoadFile(cfg.Clusters[name])
			if err != nil {
				return failed("%v", err)
			}
			want := c.Args().Tail()
			base := strings.TrimSuffix(u.String(), "/") + chatops.FleetLockPrefix
			var nodes []fleetLockNode
			for _, n := range cluster.Nodes() {
				if len(want) > 0 && !slices.Contains(want, n.Name) {
					continue
				}
				nodes = append(nodes, fleetLockNode{Node: n.Name, ClientID: n.FleetLockID,
					BaseURL: fleetlock.BaseURL(base, name, n.Name, fleetlock.Token(fc.Key, name, n.Name))})
			}
			for _, w := range want {
				if !slices.ContainsFunc(nodes, func(n fleetLockNode) bool { return n.Node == w }) {
					return failed("cluster %s has no node %q", name, w)
				}
			}
			if jsonOutput(c) {
				return writeJSON(c.App.Writer, nodes)
			}
			for _, n := range nodes {
				id := n.ClientID
				if id == "" {
					id = "(no fleetLockId in the inventory: its requests are refused)"
				}
				fmt.Fprintf(c.App.Writer, "# %s, client ID %s\n[updates]\nstrategy = \"fleet_lock\"\n[updates.fleet_lock]\nbase_url = %q\n\n", n.Node, id, n.BaseURL)
			}
			return nil
		},
	}
}
