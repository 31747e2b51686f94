package runbooks

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/runbooks/expr"
	"kedge.dev/kedge/runbooks/inventory"
)

// Plan is what a runbook will do, resolved as far as it can be before it
// runs: which step runs on which hosts, in which wave.
type Plan struct {
	Runbook string         `json:"runbook"`
	Cluster string         `json:"cluster"`
	Params  map[string]any `json:"params"`
	Steps   []PlannedStep  `json:"steps"`
}

// PlannedStep is one step of a plan. Wave 1 steps start at once; a step of
// wave N starts after the steps it needs, the latest of which is in wave
// N-1.
type PlannedStep struct {
	ID       string        `json:"id"`
	Wave     int           `json:"wave"`
	Kind     string        `json:"kind"`
	Action   string        `json:"action,omitempty"`
	Runbook  string        `json:"runbook,omitempty"`
	Prompt   string        `json:"prompt,omitempty"`
	Needs    []string      `json:"needs,omitempty"`
	Hosts    []string      `json:"hosts,omitempty"`
	Deferred string        `json:"deferred,omitempty"` // why hosts or params are known only at run time
	When     string        `json:"when,omitempty"`
	Retry    Retry         `json:"retry"`
	Timeout  time.Duration `json:"timeout,omitempty"`
	Undo     string        `json:"undo,omitempty"`
	Child    *Plan         `json:"child,omitempty"` // for a rollout: the plan of its first item

	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	FailureBudget  string `json:"failureBudget,omitempty"`
}

// MakePlan resolves a loaded runbook against params (already resolved with
// ResolveParams) and a cluster.
func MakePlan(l *Loaded, params map[string]any, cluster *inventory.Cluster) (*Plan, error) {
	return makePlan(l.Runbook, l.Children, params, cluster)
}

func makePlan(rb *Runbook, children map[string]*Runbook, params map[string]any, cluster *inventory.Cluster) (*Plan, error) {
	p := &Plan{Runbook: rb.Name, Cluster: cluster.Name, Params: maskSecrets(rb, params)}
	waves := Waves(rb)
	vars := Vars(params, cluster, nil)
	for i, s := range rb.Steps {
		ps := PlannedStep{ID: s.ID, Wave: waves[i], Kind: s.Kind(), Action: s.Action, Runbook: s.Runbook,
			Needs: s.Needs, When: s.When, Retry: s.Retry.WithDefaults(), Timeout: s.Timeout}
		if s.Approval != nil {
			ps.Prompt = s.Approval.Prompt
		}
		var undos []string
		for _, u := range s.Undo {
			undos = append(undos, u.Action)
		}
		ps.Undo = strings.Join(undos, ", ")
		if s.On != "" {
			if readsSteps(s.On) {
				ps.Deferred = "hosts come from an earlier step's outputs"
			} else {
				hosts, _, err := ResolveOn(s.On, vars, cluster)
				if err != nil {
					return nil, fmt.Errorf("step %s: on: %w", s.ID, err)
				}
				ps.Hosts = hosts
			}
		}
		itemVars := vars
		if s.Rollout != nil {
			ps.Kind = "rollout"
			ps.MaxUnavailable, ps.FailureBudget = s.Rollout.MaxUnavailable, s.Rollout.FailureBudget
			if readsSteps(s.Rollout.Over) {
				ps.Deferred = "items come from an earlier step's outputs"
			} else {
				over, err := expr.RenderValue(s.Rollout.Over, vars)
				if err != nil {
					return nil, fmt.Errorf("step %s: rollout.over: %w", s.ID, err)
				}
				if list, ok := over.([]any); ok {
					for _, e := range list {
						ps.Hosts = append(ps.Hosts, expr.Stringify(e))
					}
				}
				for _, k := range []*string{&ps.MaxUnavailable, &ps.FailureBudget} {
					if v, err := expr.RenderValue(*k, vars); err == nil {
						*k = expr.Stringify(v)
					}
				}
			}
			if len(ps.Hosts) == 0 {
				p.Steps = append(p.Steps, ps)
				continue
			}
			itemVars = map[string]any{"params": vars["params"], "cluster": vars["cluster"], "steps": vars["steps"], "item": ps.Hosts[0]}
		}
		if s.Runbook != "" {
			child := children[s.Runbook]
			if child == nil {
				return nil, fmt.Errorf("step %s: runbook %s is not loaded", s.ID, s.Runbook)
			}
			if anyReadsSteps(s.With) {
				ps.Deferred = "params come from an earlier step's outputs"
			} else {
				with, err := expr.RenderWith(s.With, itemVars)
				if err != nil {
					return nil, fmt.Errorf("step %s: with: %w", s.ID, err)
				}
				cp, err := ResolveParams(child, with, cluster)
				if err != nil {
					return nil, fmt.Errorf("step %s: %w", s.ID, err)
				}
				if ps.Child, err = makePlan(child, children, cp, cluster); err != nil {
					return nil, fmt.Errorf("step %s: %w", s.ID, err)
				}
			}
		}
		p.Steps = append(p.Steps, ps)
	}
	slices.SortStableFunc(p.Steps, func(a, b PlannedStep) int { return a.Wave - b.Wave })
	return p, nil
}

func readsSteps(s string) bool {
	t, err := expr.ParseTemplate(s)
	if err != nil {
		return false
	}
	for _, seg := range t {
		if seg.IsExpr {
			if refs, err := expr.Check(seg.Expr); err == nil && len(refs.Steps) > 0 {
				return true
			}
		}
	}
	return false
}

func anyReadsSteps(v any) bool {
	switch x := v.(type) {
	case string:
		return readsSteps(x)
	case []any:
		return slices.ContainsFunc(x, anyReadsSteps)
	case map[string]any:
		for _, e := range x {
			if anyReadsSteps(e) {
				return true
			}
		}
	}
	return false
}

// Waves numbers each step (by index) with its depth in the DAG: 1 for steps
// that need nothing, else 1 + the deepest step it needs.
func Waves(rb *Runbook) []int {
	index := map[string]int{}
	for i, s := range rb.Steps {
		index[s.ID] = i
	}
	waves := make([]int, len(rb.Steps))
	var depth func(i int, seen map[int]bool) int
	depth = func(i int, seen map[int]bool) int {
		if waves[i] > 0 {
			return waves[i]
		}
		if seen[i] {
			return 0
		}
		seen[i] = true
		d := 1
		for _, n := range rb.Steps[i].Needs {
			if j, ok := index[n]; ok {
				d = max(d, depth(j, seen)+1)
			}
		}
		waves[i] = d
		return d
	}
	for i := range rb.Steps {
		depth(i, map[int]bool{})
	}
	return waves
}

// Vars builds the variables expressions see. steps may be nil.
func Vars(params map[string]any, cluster *inventory.Cluster, steps map[string]any) map[string]any {
	if steps == nil {
		steps = map[string]any{}
	}
	return map[string]any{"params": params, "cluster": ClusterVar(cluster), "steps": steps}
}

// ClusterVar is the `cluster` variable: name, controllers, workers (each a
// list of {name, address, role, labels, taints}) and nodes (all of them).
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
	}
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
		"version": cmp.Or(k.Version, DefaultKubernetesVersion), "imageRepository": cmp.Or(k.ImageRepository, DefaultImageRepository),
		"etcdImage": cmp.Or(k.EtcdImage, DefaultEtcdImage),
	}
}

// The control plane the built-in runbooks render when the inventory does
// not say.
const (
	DefaultKubernetesVersion = "v1.35.4"
	DefaultImageRepository   = "registry.k8s.io"
	DefaultEtcdImage         = "registry.k8s.io/etcd:3.6.16-0"
)

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

// ResolveOn evaluates a step's `on:` to node names. single reports whether
// it named exactly one host as a plain string (outputs are then the
// action's outputs rather than a map keyed by node).
func ResolveOn(on string, vars map[string]any, cluster *inventory.Cluster) (hosts []string, single bool, err error) {
	t, err := expr.ParseTemplate(on)
	if err != nil {
		return nil, false, err
	}
	val, err := t.Render(vars)
	if err != nil {
		return nil, false, err
	}
	var sels []string
	switch x := val.(type) {
	case string:
		for _, s := range strings.Split(x, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sels = append(sels, s)
			}
		}
		single = len(sels) == 1 && sels[0] != "all" && sels[0] != "workers" && sels[0] != "controllers"
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false, fmt.Errorf("on: list item %v is not a node name", e)
			}
			sels = append(sels, s)
		}
	default:
		return nil, false, fmt.Errorf("on: gave %s, want a node name or a list of them", describe(val))
	}
	nodes, err := resolveNodes(sels, cluster)
	if err != nil {
		return nil, false, err
	}
	for _, n := range nodes {
		hosts = append(hosts, n.(string))
	}
	return hosts, single, nil
}

// SecretMask replaces secret param values wherever Kedge prints them.
const SecretMask = "(secret)"

func maskSecrets(rb *Runbook, params map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		out[k] = v
	}
	for _, name := range rb.SecretParams() {
		if _, ok := out[name]; ok {
			out[name] = SecretMask
		}
	}
	return out
}
