package plan

import (
	"cmp"
	"maps"
	"net/url"
	"slices"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runbooks/inventory"
)

// Vars builds the variables expressions see. steps may be nil.
func Vars(params map[string]any, cluster *inventory.Cluster, steps map[string]any) map[string]any {
	if steps == nil {
		steps = map[string]any{}
	}
	return map[string]any{"params": params, "cluster": ClusterVar(cluster), "steps": steps}
}

// withHost is vars as a step sees them on one host: `host` is the node.
func withHost(vars map[string]any, cluster *inventory.Cluster, name string) map[string]any {
	out := make(map[string]any, 4)
	for _, k := range []string{"params", "cluster", "steps"} {
		out[k] = vars[k]
	}
	if n, ok := cluster.Node(name); ok {
		out["host"] = NodeVar(n)
	}
	return expr.WithSpend(out, expr.SpendOf(vars))
}

// ClusterVar is the `cluster` variable: name, controllers, workers (each a
// list of {name, address, role, labels, taints}), nodes (all of them),
// kubernetes and backups (the backup destinations' names).
func ClusterVar(c *inventory.Cluster) map[string]any {
	if c == nil {
		return map[string]any{}
	}
	list := func(nodes []inventory.Node) []any {
		out := make([]any, len(nodes))
		for i, n := range nodes {
			out[i] = NodeVar(n)
		}
		return out
	}
	return map[string]any{
		"name":        c.Name,
		"controllers": list(c.Controllers),
		"workers":     list(c.Workers),
		"nodes":       list(c.Nodes()),
		"kubernetes":  KubernetesVar(c),
		"backups":     backupNames(c),
		"maintenance": MaintenanceVar(c),
		"alerts":      AlertsVar(c),
	}
}

// MaintenanceVar is the inventory's maintenance window as expressions
// see it (cluster.maintenance): schedule, duration and timeZone strings
// and blackouts a list, every field present, empty when unset.
func MaintenanceVar(c *inventory.Cluster) map[string]any {
	m := map[string]any{"schedule": "", "duration": "", "timeZone": "", "blackouts": []any{}}
	if w := c.Maintenance; w != nil {
		m["schedule"], m["duration"], m["timeZone"] = w.Schedule, w.Duration, w.TimeZone
		b := make([]any, len(w.Blackouts))
		for i, d := range w.Blackouts {
			b[i] = d
		}
		m["blackouts"] = b
	}
	return m
}

// AlertsVar is the inventory's alerts section as expressions see it
// (cluster.alerts): url a string and names a list, both present, empty
// when unset.
func AlertsVar(c *inventory.Cluster) map[string]any {
	m := map[string]any{"url": "", "names": []any{}}
	if a := c.Alerts; a != nil {
		names := make([]any, len(a.Names))
		for i, n := range a.Names {
			names[i] = n
		}
		m["url"], m["names"] = a.URL, names
	}
	return m
}

// backupNames are the names of the inventory's backup destinations,
// sorted (cluster.backups): where they are is the worker's business.
func backupNames(c *inventory.Cluster) []any {
	out := []any{}
	for _, name := range slices.Sorted(maps.Keys(c.Backups)) {
		out = append(out, name)
	}
	return out
}

// KubernetesVar is the inventory's kubernetes section as expressions see
// it (cluster.kubernetes): every field present, empty when unset, so
// runbooks can test it with `!= ""`.
func KubernetesVar(c *inventory.Cluster) map[string]any {
	k := c.Kubernetes
	dns := make([]any, len(k.ClusterDNS))
	for i, d := range k.ClusterDNS {
		dns[i] = d
	}
	apiServer := "" // the server's host name, what its certificate must name
	if u, err := url.Parse(k.Server); err == nil {
		apiServer = u.Hostname()
	}
	return map[string]any{
		"server": k.Server, "apiServer": apiServer, "kubeletImage": k.KubeletImage, "runtime": k.Runtime,
		"clusterDNS": dns, "clusterDomain": k.ClusterDomain, "serviceCIDR": k.ServiceCIDR, "podCIDR": k.PodCIDR,
		"version":            cmp.Or(k.Version, runbooks.DefaultKubernetesVersion),
		"imageRepository":    cmp.Or(k.ImageRepository, runbooks.DefaultImageRepository),
		"etcdImage":          cmp.Or(k.EtcdImage, runbooks.DefaultEtcdImage),
		"controlPlaneListen": cmp.Or(k.ControlPlaneListen, "kubeadm"),
	}
}

// NodeVar is a node as expressions see it (also the `host` variable).
func NodeVar(n inventory.Node) map[string]any {
	strs := func(s []string) []any {
		out := make([]any, len(s))
		for i, e := range s {
			out[i] = e
		}
		return out
	}
	return map[string]any{"name": n.Name, "nodeName": n.KubeName(), "address": n.Address, "role": n.Role, "labels": strs(n.Labels), "taints": strs(n.Taints)}
}
