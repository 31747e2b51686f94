package trust

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/activities/kubeapi"
	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/runbooks/inventory"

	"kedge.dev/kedge/actions/kube"
)

// ErrType is the error type of a refused action. It is not retried.
const ErrType = errtype.CredentialRefused

// Guard is the worker interceptor that resolves each action's targets from
// the registry before the action runs.
type Guard struct {
	interceptor.WorkerInterceptorBase
	// Registry holds the clusters served; nil serves none.
	Registry Registry
	Logger   *slog.Logger
}

// InterceptActivity puts the check in front of every activity.
func (g *Guard) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityGuard{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, g: g}
}

type activityGuard struct {
	interceptor.ActivityInboundInterceptorBase
	g *Guard
}

func (a *activityGuard) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	for i, arg := range in.Args {
		resolved, err := a.g.Resolve(arg)
		if err != nil {
			info := activity.GetInfo(ctx)
			a.g.log().Warn("kedge worker: action refused", "audit", true,
				"workflowId", info.WorkflowExecution.ID, "runId", info.WorkflowExecution.RunID,
				"workflowType", info.WorkflowType.Name, "activity", info.ActivityType.Name,
				"attempt", info.Attempt, "reason", err.Error())
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrType, err)
		}
		in.Args[i] = resolved
	}
	return a.Next.ExecuteActivity(ctx, in)
}

func (g *Guard) log() *slog.Logger {
	if g.Logger == nil {
		return slog.Default()
	}
	return g.Logger
}

var (
	sshType   = reflect.TypeFor[target.SSH]()
	vaultType = reflect.TypeFor[target.Vault]()
	kubeType  = reflect.TypeFor[target.Kube]()
)

// Resolve returns an action's input with every target it names filled in
// from the worker's own inventory of the cluster it names: the SSH
// target from the host's reference (cluster, node), the Vault from the
// cluster's, the kubeconfig from the cluster's. Whatever else the input
// says of a target (an address, a user, a key, a token file: a run sent
// before runs carried references only, or a forged one) is dropped. A
// cluster the worker does not serve, or a host or section its inventory
// does not have, is an error; so is a kubeconfig to save that reaches
// beyond the cluster's API servers.
func (g *Guard) Resolve(arg any) (any, error) {
	v := reflect.ValueOf(arg)
	ptr := v.Kind() == reflect.Pointer && !v.IsNil()
	if ptr {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return arg, nil
	}
	out := reflect.New(v.Type())
	out.Elem().Set(v)
	if err := g.resolveFields(out.Elem()); err != nil {
		return nil, err
	}
	if s, ok := out.Elem().Interface().(kube.SaveKubeconfigInput); ok {
		if err := g.checkSave(s); err != nil {
			return nil, err
		}
	}
	if ptr {
		return out.Interface(), nil
	}
	return out.Elem().Interface(), nil
}

// resolveFields replaces each target field of an input struct.
func (g *Guard) resolveFields(v reflect.Value) error {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		var (
			got any
			err error
		)
		switch f.Type() {
		case sshType:
			got, err = g.ssh(f.Interface().(target.SSH))
		case vaultType:
			got, err = g.vault(f.Interface().(target.Vault))
		case kubeType:
			got, err = g.kube(f.Interface().(target.Kube))
		default:
			continue
		}
		if err != nil {
			return err
		}
		f.Set(reflect.ValueOf(got))
	}
	return nil
}

func (g *Guard) cluster(name string) (*inventory.Cluster, error) {
	if g.Registry == nil {
		return nil, notServed(name, nil)
	}
	return g.Registry.Cluster(name)
}

// legacy finds the served cluster that gives exactly what an input sent
// before inputs named their cluster says. Such an input is resolved only
// when one of the worker's inventories agrees with all of it.
func (g *Guard) legacy(same func(*inventory.Cluster) bool) *inventory.Cluster {
	if g.Registry == nil {
		return nil
	}
	cs, _ := g.Registry.Clusters()
	for _, c := range cs {
		if same(c) {
			return c
		}
	}
	return nil
}

func (g *Guard) ssh(t target.SSH) (target.SSH, error) {
	if t.Cluster == "" {
		c := g.legacy(func(c *inventory.Cluster) bool {
			want, err := c.Target(t.Node)
			want.Cluster = ""
			return err == nil && reflect.DeepEqual(t, want)
		})
		if c == nil {
			return t, fmt.Errorf("host %s: the run names no cluster, and no inventory of this worker reaches the host as the run says", t.Node)
		}
		return c.Target(t.Node)
	}
	c, err := g.cluster(t.Cluster)
	if err != nil {
		return t, err
	}
	want, err := c.Target(t.Node)
	if err != nil {
		return t, fmt.Errorf("cluster %s: this worker's inventory has no host %q", c.Name, t.Node)
	}
	return want, nil
}

func (g *Guard) vault(v target.Vault) (target.Vault, error) {
	var c *inventory.Cluster
	if v.Cluster == "" {
		if c = g.legacy(func(c *inventory.Cluster) bool { return c.Vault.Address != "" && c.Vault == v }); c == nil {
			return v, fmt.Errorf("the run names no cluster for its Vault, and no inventory of this worker names that Vault (address %q)", v.Address)
		}
	} else {
		var err error
		if c, err = g.cluster(v.Cluster); err != nil {
			return v, err
		}
	}
	if c.Vault.Address == "" {
		return v, fmt.Errorf("cluster %s: this worker's inventory names no vault.address", c.Name)
	}
	want := c.Vault
	want.Cluster = c.Name
	return want, nil
}

func (g *Guard) kube(k target.Kube) (target.Kube, error) {
	c, err := g.cluster(k.Name)
	if err != nil {
		return k, err
	}
	if c.Kubernetes.Kubeconfig == "" {
		return k, fmt.Errorf("cluster %s: this worker's inventory names no kubernetes.kubeconfig", c.Name)
	}
	return target.Kube{Name: c.Name, Kubeconfig: c.Kubernetes.Kubeconfig, Context: c.Kubernetes.Context}, nil
}

// checkSave looks at a kubeconfig kube.save-kubeconfig would write where
// every later kube action of the cluster loads it: embedded certificates
// and keys only (kube.Saveable), and every server one of the cluster's
// own API servers (apiServers).
func (g *Guard) checkSave(s kube.SaveKubeconfigInput) error {
	c, err := g.cluster(s.Cluster.Name)
	if err != nil {
		return err
	}
	servers, err := kubeapi.Saveable(s.Content)
	if err != nil {
		return fmt.Errorf("cluster %s: the kubeconfig to save: %w", c.Name, err)
	}
	allowed := apiServers(c)
	for _, server := range servers {
		u, _ := url.Parse(server) // Saveable parsed it
		if !slices.Contains(allowed, u.Host) {
			return fmt.Errorf("cluster %s: the kubeconfig to save: its server %q is not this cluster's API server (the inventory's kubernetes.server, or a controller's address on port %d): %s",
				c.Name, server, nodefiles.DefaultAPIServerPort, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// apiServers are the host:port of the cluster's API servers as its
// inventory gives them: kubernetes.server, and each controller's address
// on the API server's port (where bootstrap points the admin
// kubeconfig).
func apiServers(c *inventory.Cluster) []string {
	var hosts []string
	if u, err := url.Parse(c.Kubernetes.Server); err == nil && u.Host != "" {
		hosts = append(hosts, u.Host)
	}
	for _, n := range c.Controllers {
		hosts = append(hosts, net.JoinHostPort(n.Address, strconv.Itoa(nodefiles.DefaultAPIServerPort)))
	}
	return hosts
}
