package typhoon

import (
	"fmt"
	"strings"

	"kedge.dev/kedge/integration/typhoon/tftemplate"
	"kedge.dev/kedge/integration/typhoon/upstream"
)

// Host is one machine of a Typhoon cluster as the bare-metal module's
// variables name it.
type Host struct {
	// Name is controllers[].name or the worker's name: a controller's
	// etcd member name.
	Name string
	// Domain is its DNS name: the host name and the Node's name (the
	// kubelet's --hostname-override).
	Domain     string
	Flavor     string // Flatcar or FCOS
	Controller bool
	// Labels and Taints are a worker's node_labels and node_taints.
	Labels, Taints []string
}

// Butane is h's Butane config: its flavour's controller or worker
// template rendered with the variables profiles.tf (controllers) and
// worker/matchbox.tf (workers) give it.
func Butane(h Host, controllers []Host, sshKey string) (string, error) {
	vars := map[string]any{
		"domain_name":            h.Domain,
		"cluster_dns_service_ip": ClusterDNS,
		"ssh_authorized_key":     sshKey,
	}
	var tmpl string
	switch {
	case h.Flavor == Flatcar && h.Controller:
		tmpl = upstream.FlatcarController
	case h.Flavor == Flatcar:
		tmpl = upstream.FlatcarWorker
	case h.Flavor == FCOS && h.Controller:
		tmpl = upstream.FCOSController
	case h.Flavor == FCOS:
		tmpl = upstream.FCOSWorker
	default:
		return "", fmt.Errorf("typhoon: %s: flavor %q", h.Name, h.Flavor)
	}
	if h.Controller {
		var initial []string
		for _, c := range controllers {
			initial = append(initial, fmt.Sprintf("%s=https://%s:2380", c.Name, c.Domain))
		}
		vars["etcd_name"] = h.Name
		vars["etcd_initial_cluster"] = strings.Join(initial, ",")
	} else {
		vars["node_labels"] = strings.Join(h.Labels, ",")
		vars["node_taints"] = strings.Join(h.Taints, ",")
	}
	return tftemplate.RenderFS(upstream.FS(), tmpl, vars)
}
