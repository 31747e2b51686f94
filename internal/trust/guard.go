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
	"kedge.dev/kedge/activities/kube"
	"kedge.dev/kedge/activities/render"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/runbooks/inventory"
)

// ErrType is the error type of a refused action. It is not retried.
const ErrType = errtype.CredentialRefused

// Guard is the worker interceptor that checks each action's input against
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
	for _, arg := range in.Args {
		if err := a.g.Check(arg); err != nil {
			info := activity.GetInfo(ctx)
			a.g.log().Warn("kedge worker: action refused", "audit", true,
				"workflowId", info.WorkflowExecution.ID, "runId", info.WorkflowExecution.RunID,
				"workflowType", info.WorkflowType.Name, "activity", info.ActivityType.Name,
				"attempt", info.Attempt, "reason", err.Error())
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrType, nil)
		}
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
	targetType = reflect.TypeFor[sshpool.Target]()
	vaultType  = reflect.TypeFor[inventory.Vault]()
	kubeType   = reflect.TypeFor[kube.Cluster]()
)

// Check looks at an action's input: every SSH target, Vault and
// kubeconfig it names must be the worker's own for that cluster, and a
// kubeconfig a run asks the worker to save must reach only that
// cluster's API server.
func (g *Guard) Check(arg any) error {
	v := reflect.Indirect(reflect.ValueOf(arg))
	if v.Kind() != reflect.Struct {
		return nil
	}
	if err := g.checkFields(v); err != nil {
		return err
	}
	if s, ok := v.Interface().(kube.SaveKubeconfigInput); ok {
		return g.checkSave(s)
	}
	return nil
}

func (g *Guard) checkFields(v reflect.Value) error {
	for i := range v.NumField() {
		f := v.Field(i)
		var err error
		switch f.Type() {
		case targetType:
			err = g.checkTarget(f.Interface().(sshpool.Target))
		case vaultType:
			err = g.checkVault(f.Interface().(inventory.Vault))
		case kubeType:
			err = g.checkKube(f.Interface().(kube.Cluster))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (g *Guard) cluster(name string) (*inventory.Cluster, error) {
	if g.Registry == nil {
		return nil, notServed(name, nil)
	}
	return g.Registry.Cluster(name)
}

// anyCluster is for inputs scheduled before they named their cluster:
// allowed when one of the worker's clusters gives exactly this.
func (g *Guard) anyCluster(ok func(*inventory.Cluster) bool) bool {
	if g.Registry == nil {
		return false
	}
	cs, _ := g.Registry.Clusters()
	for _, c := range cs {
		if ok(c) {
			return true
		}
	}
	return false
}

func (g *Guard) checkTarget(t sshpool.Target) error {
	if t.Cluster == "" {
		if g.anyCluster(func(c *inventory.Cluster) bool {
			want, err := c.Target(t.Node)
			return err == nil && len(targetDiff(t, want)) == 0
		}) {
			return nil
		}
		return fmt.Errorf("host %s: no inventory of this worker reaches it as the run says (%s)", t.Node, describeTarget(t))
	}
	c, err := g.cluster(t.Cluster)
	if err != nil {
		return err
	}
	want, err := c.Target(t.Node)
	if err != nil {
		return fmt.Errorf("cluster %s: this worker's inventory has no host %q", c.Name, t.Node)
	}
	if d := targetDiff(t, want); len(d) > 0 {
		return fmt.Errorf("cluster %s, host %s: %s", c.Name, t.Node, d)
	}
	return nil
}

func (g *Guard) checkVault(v inventory.Vault) error {
	if v.Cluster == "" {
		if g.anyCluster(func(c *inventory.Cluster) bool { return len(vaultDiff(v, c.Vault)) == 0 }) {
			return nil
		}
		return fmt.Errorf("no inventory of this worker names the run's Vault (address %q, tokenFile %q)", v.Address, v.TokenFile)
	}
	c, err := g.cluster(v.Cluster)
	if err != nil {
		return err
	}
	if d := vaultDiff(v, c.Vault); len(d) > 0 {
		return fmt.Errorf("cluster %s: %s", c.Name, d)
	}
	return nil
}

func (g *Guard) checkKube(k kube.Cluster) error {
	c, err := g.cluster(k.Name)
	if err != nil {
		return err
	}
	var d diffs
	d.add("kubernetes.kubeconfig", k.Kubeconfig, c.Kubernetes.Kubeconfig)
	d.add("kubernetes.context", k.Context, c.Kubernetes.Context)
	if len(d) > 0 {
		return fmt.Errorf("cluster %s: %s", c.Name, d)
	}
	return nil
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
	servers, err := kube.Saveable(s.Content)
	if err != nil {
		return fmt.Errorf("cluster %s: the kubeconfig to save: %w", c.Name, err)
	}
	allowed := apiServers(c)
	for _, server := range servers {
		u, _ := url.Parse(server) // Saveable parsed it
		if !slices.Contains(allowed, u.Host) {
			return fmt.Errorf("cluster %s: the kubeconfig to save: its server %q is not this cluster's API server (the inventory's kubernetes.server, or a controller's address on port %d): %s",
				c.Name, server, render.DefaultAPIServerPort, strings.Join(allowed, ", "))
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
		hosts = append(hosts, net.JoinHostPort(n.Address, strconv.Itoa(render.DefaultAPIServerPort)))
	}
	return hosts
}

// diffs lists the fields where a run's input differs from the worker's
// inventory.
type diffs []string

func (d *diffs) add(field, got, want string) {
	if got != want {
		*d = append(*d, fmt.Sprintf("the run's %s %q is not the worker's (%q)", field, got, want))
	}
}

func (d diffs) String() string { return strings.Join(d, "; ") }

func targetDiff(got, want sshpool.Target) diffs {
	var d diffs
	d.add("address", got.Address, want.Address)
	d.add("port", strconv.Itoa(got.Port), strconv.Itoa(want.Port))
	d.add("ssh user", got.User, want.User)
	d.add("ssh.become", got.Become, want.Become)
	d.add("ssh.identityFile", got.IdentityFile, want.IdentityFile)
	d.add("ssh.knownHostsFile", got.KnownHostsFile, want.KnownHostsFile)
	g, w := got.VaultCA, want.VaultCA
	switch {
	case g == nil && w == nil:
	case g == nil || w == nil:
		d.add("ssh.vaultSigner", describeCA(g), describeCA(w))
	default:
		d.add("vault.address (ssh.vaultSigner)", g.Address, w.Address)
		d.add("vault.tokenFile (ssh.vaultSigner)", g.TokenFile, w.TokenFile)
		d.add("vault.caFile (ssh.vaultSigner)", g.CAFile, w.CAFile)
		d.add("ssh.vaultSigner.mount", g.Mount, w.Mount)
		d.add("ssh.vaultSigner.role", g.Role, w.Role)
	}
	return d
}

func vaultDiff(got, want inventory.Vault) diffs {
	var d diffs
	d.add("vault.address", got.Address, want.Address)
	d.add("vault.tokenFile", got.TokenFile, want.TokenFile)
	d.add("vault.caFile", got.CAFile, want.CAFile)
	d.add("vault.pki", got.PKI, want.PKI)
	d.add("vault.role", got.Role, want.Role)
	d.add("vault.kv", got.KV, want.KV)
	return d
}

func describeCA(ca *sshpool.VaultCA) string {
	if ca == nil {
		return "none"
	}
	return ca.Mount + "/" + ca.Role + " at " + ca.Address
}

func describeTarget(t sshpool.Target) string {
	return fmt.Sprintf("%s@%s:%d, identityFile %q, knownHostsFile %q", t.User, t.Address, t.Port, t.IdentityFile, t.KnownHostsFile)
}
