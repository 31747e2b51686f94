package inventory

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/prometheus"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/internal/window"
	"kedge.dev/kedge/runbooks/source"
)

// APIVersion and Kind identify an inventory document.
const (
	APIVersion = "kedge/v1"
	Kind       = "Cluster"
)

// Roles of a node.
const (
	RoleController = "controller"
	RoleWorker     = "worker"
)

// Cluster is a validated inventory snapshot.
type Cluster struct {
	Name        string     `json:"name"`
	SSH         SSH        `json:"ssh"`
	Kubernetes  Kubernetes `json:"kubernetes,omitempty"`
	Vault       Vault      `json:"vault,omitempty"`
	Controllers []Node     `json:"controllers"`
	Workers     []Node     `json:"workers"`
	// TaskQueue is the Temporal task queue of the workers that can reach
	// this cluster's hosts (its site): every action of a runbook on this
	// cluster is scheduled there unless its node names another. Empty:
	// the queue the runbook itself runs on.
	TaskQueue string `json:"taskQueue,omitempty"`
	// Backups are the destinations a run may store the cluster's
	// backups in (etcd.snapshot), by name. Only the worker's own
	// inventory defines them: a run names one, never a path or an
	// endpoint.
	Backups map[string]Backup `json:"backups,omitempty"`
	// Maintenance is the cluster's maintenance window: when disruptive
	// rollouts that honour it (os-update) may start a node.
	Maintenance *window.Spec `json:"maintenance,omitempty"`
	// Alerts hold rollouts that honour them (os-update): no node starts
	// while one of them fires in the cluster's Prometheus.
	Alerts *Alerts `json:"alerts,omitempty"`
}

// Alerts is the cluster's Prometheus and the alerts that hold disruptive
// rollouts while they fire.
type Alerts struct {
	// URL is the Prometheus server, http(s)://HOST[:PORT]
	// (prometheus.CheckURL).
	URL string `json:"url"`
	// Names are the alert names (alertname) that hold a rollout.
	Names []string `json:"names"`
}

// Backup is one backup destination: a directory on the worker
// ({kind: local, path}) or an S3-compatible bucket ({kind: s3, endpoint,
// bucket, region, credentialsFile, caFile, insecure}).
type Backup = etcd.Destination

// Backup is the cluster's backup destination called name.
func (c *Cluster) Backup(name string) (Backup, error) {
	if b, ok := c.Backups[name]; ok {
		return b, nil
	}
	names := slices.Sorted(maps.Keys(c.Backups))
	defined := "none"
	if len(names) > 0 {
		defined = strings.Join(names, ", ")
	}
	return Backup{}, fmt.Errorf("cluster %s: the inventory defines no backup destination %q under backups: (it defines: %s)", c.Name, name, defined)
}

// SSH holds the connection defaults of every node.
type SSH struct {
	User           string `json:"user,omitempty"`
	Port           int    `json:"port,omitempty"`
	IdentityFile   string `json:"identityFile,omitempty"`
	Agent          bool   `json:"agent,omitempty"`
	KnownHostsFile string `json:"knownHostsFile"`
	// Become is how the login user gets root for host actions: "sudo"
	// (through `sudo -n`, never a password prompt) or "none" (the user is
	// root). Empty means none.
	Become string `json:"become,omitempty"`
	// VaultSigner logs in with short-lived certificates from the cluster
	// Vault's SSH secrets engine.
	VaultSigner *VaultSigner `json:"vaultSigner,omitempty"`
}

// VaultSigner is a Vault SSH secrets engine mount and role.
type VaultSigner struct {
	Mount string `json:"mount"`
	Role  string `json:"role"`
}

// Kubernetes says how Kedge reaches the cluster's API server.
type Kubernetes struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// What the runbooks that build nodes render onto them (node-join,
	// bootstrap). All optional; render's defaults apply.
	//
	// Server is the API endpoint the nodes use (default: the
	// kubeconfig's).
	Server string `json:"server,omitempty"`
	// KubeletImage is the kubelet container image, e.g.
	// quay.io/poseidon/kubelet:v1.35.4.
	KubeletImage string `json:"kubeletImage,omitempty"`
	// Runtime runs the kubelet container: docker (default) or podman.
	Runtime       string   `json:"runtime,omitempty"`
	ClusterDNS    []string `json:"clusterDNS,omitempty"`
	ClusterDomain string   `json:"clusterDomain,omitempty"`
	ServiceCIDR   string   `json:"serviceCIDR,omitempty"`
	PodCIDR       string   `json:"podCIDR,omitempty"`
	// Version and ImageRepository name the control plane's images
	// (REPOSITORY/kube-apiserver:VERSION, ...); EtcdImage is etcd's.
	// bootstrap renders them and cert-renewal re-renders the same.
	Version         string `json:"version,omitempty"`
	ImageRepository string `json:"imageRepository,omitempty"`
	EtcdImage       string `json:"etcdImage,omitempty"`
	// ControlPlaneListen is what the control plane bootstrap renders
	// binds: "kubeadm" (default, kubeadm's layout: the API server on
	// every address, etcd's clients on 127.0.0.1 and the node's address,
	// etcd's metrics, the controller manager and the scheduler on
	// 127.0.0.1) or "node": every listener on the controller's inventory
	// address alone, never loopback or every address, so that nothing
	// on another interface or sharing the host's loopback reaches it.
	ControlPlaneListen string `json:"controlPlaneListen,omitempty"`
}

// Vault says how Kedge reaches the cluster's Vault: certificates come from
// its PKI engine, secrets from its KV v2 engine. The token is read from
// TokenFile (or $VAULT_TOKEN) by the worker when an action runs, so it
// never travels through Temporal.
type Vault = target.Vault

// Node is one host of the cluster.
type Node struct {
	Name string `json:"name"`
	// NodeName is the Kubernetes Node's name when it is not Name (the
	// kubelet's --hostname-override: on bare-metal Typhoon, the machine's
	// domain). Kubernetes actions act on it.
	NodeName string `json:"nodeName,omitempty"`
	Role     string `json:"role"`
	Address  string `json:"address"`
	Port     int    `json:"port,omitempty"`
	User     string `json:"user,omitempty"`
	// Become overrides the cluster's ssh.become for this node.
	Become string   `json:"become,omitempty"`
	Labels []string `json:"labels,omitempty"`
	Taints []string `json:"taints,omitempty"`
	// TaskQueue overrides the cluster's task queue for this node's
	// actions: a node at another site.
	TaskQueue string `json:"taskQueue,omitempty"`
	// FleetLockID is the ID the node's FleetLock client (Zincati) sends:
	// Kedge's FleetLock endpoint grants a reboot only to the node whose
	// ID this is.
	FleetLockID string `json:"fleetLockId,omitempty"`
}

// fleetLockIDRE is what a FleetLock client ID may hold (Zincati sends 32
// hex digits).
var fleetLockIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// KubeName is the node's Kubernetes Node name: NodeName, else Name.
func (n Node) KubeName() string {
	if n.NodeName != "" {
		return n.NodeName
	}
	return n.Name
}

// KubeName is the Kubernetes Node name of the inventory's node called
// name (name itself when the inventory has no such node).
func (c *Cluster) KubeName(name string) string {
	for _, n := range c.Nodes() {
		if n.Name == name {
			return n.KubeName()
		}
	}
	return name
}

// Nodes returns controllers then workers.
func (c *Cluster) Nodes() []Node {
	return append(slices.Clone(c.Controllers), c.Workers...)
}

// Focus is the cluster as one node's runbook sees it in a rollout: every
// controller, and of the workers only that node. A rollout over a
// thousand workers then hands each node runbook a small input instead of
// the whole inventory (a node's input lands in its history and in its
// rollout's).
func (c *Cluster) Focus(node string) Cluster {
	out := *c
	out.Workers = nil
	for _, w := range c.Workers {
		if w.Name == node {
			out.Workers = []Node{w}
		}
	}
	return out
}

// TaskQueueFor is the task queue of the workers that run actions on node
// ("" for actions on no node): the node's own, else the cluster's, else ""
// (the runbook's own queue).
func (c *Cluster) TaskQueueFor(node string) string {
	if n, ok := c.Node(node); ok && n.TaskQueue != "" {
		return n.TaskQueue
	}
	return c.TaskQueue
}

// Node finds a node by name.
func (c *Cluster) Node(name string) (Node, bool) {
	for _, list := range [][]Node{c.Controllers, c.Workers} {
		for _, n := range list {
			if n.Name == name {
				return n, true
			}
		}
	}
	return Node{}, false
}

// Select resolves a node selector: "all", "controllers", "workers", or a
// node name.
func (c *Cluster) Select(sel string) ([]string, error) {
	var nodes []Node
	switch sel {
	case "all":
		nodes = c.Nodes()
	case "controllers":
		nodes = c.Controllers
	case "workers":
		nodes = c.Workers
	default:
		if _, ok := c.Node(sel); !ok {
			return nil, fmt.Errorf("no node %q in cluster %s (nodes: %s)", sel, c.Name, strings.Join(c.names(), ", "))
		}
		return []string{sel}, nil
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names, nil
}

func (c *Cluster) names() []string {
	var names []string
	for _, n := range c.Nodes() {
		names = append(names, n.Name)
	}
	return names
}

// Target says how to reach a node over SSH.
func (c *Cluster) Target(name string) (target.SSH, error) {
	n, ok := c.Node(name)
	if !ok {
		return target.SSH{}, fmt.Errorf("no node %q in cluster %s", name, c.Name)
	}
	t := target.SSH{
		Cluster:        c.Name,
		Node:           n.Name,
		Address:        n.Address,
		Port:           cmp.Or(n.Port, c.SSH.Port, target.DefaultPort),
		User:           cmp.Or(n.User, c.SSH.User, target.DefaultUser),
		KnownHostsFile: c.SSH.KnownHostsFile,
	}
	if cmp.Or(n.Become, c.SSH.Become) == BecomeSudo {
		t.Become = target.BecomeSudo
	}
	if !c.SSH.Agent {
		t.IdentityFile = c.SSH.IdentityFile
	}
	if vs := c.SSH.VaultSigner; vs != nil {
		t.VaultCA = &target.VaultCA{Address: c.Vault.Address, TokenFile: c.Vault.TokenFile, CAFile: c.Vault.CAFile, Mount: vs.Mount, Role: vs.Role}
	}
	return t, nil
}

// LoadFile reads and validates an inventory file. Relative paths in it are
// resolved against the file's directory.
func LoadFile(path string) (*Cluster, error) {
	docs, err := source.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, source.Errors{{Pos: source.At(path, docs[1].Root), Msg: "an inventory file holds one document"}}
	}
	c, err := Decode(docs[0])
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	c.SSH.IdentityFile = resolve(abs, c.SSH.IdentityFile)
	c.SSH.KnownHostsFile = resolve(abs, c.SSH.KnownHostsFile)
	c.Kubernetes.Kubeconfig = resolve(abs, c.Kubernetes.Kubeconfig)
	c.Vault.TokenFile = resolve(abs, c.Vault.TokenFile)
	c.Vault.CAFile = resolve(abs, c.Vault.CAFile)
	return c, nil
}

func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Decode validates one parsed inventory document.
func Decode(doc source.Document) (*Cluster, error) {
	d := &decoder{f: doc.File, c: &Cluster{}}
	f, c, errs := d.f, d.c, &d.errs
	source.Fields(f, doc.Root, "inventory", errs, map[string]func(*yaml.Node){
		"apiVersion": func(v *yaml.Node) { d.apiVersion = source.String(f, v, "apiVersion", errs) },
		"kind":       func(v *yaml.Node) { d.kind = source.String(f, v, "kind", errs) },
		"metadata":   d.metadata,
		"ssh":        d.ssh,
		"kubernetes": d.kubernetes,
		"vault":      d.vault,
		"taskQueue": func(v *yaml.Node) {
			c.TaskQueue = source.String(f, v, "taskQueue", errs)
			checkTaskQueue(f, v, c.TaskQueue, errs)
		},
		"backups":     d.backups,
		"maintenance": d.maintenance,
		"alerts":      d.alerts,
		"controllers": d.nodeList(RoleController),
		"workers":     d.nodeList(RoleWorker),
	})
	top := source.At(f, doc.Root)
	d.checkTop(top)
	d.checkNodes()
	if len(d.nodes) == 0 {
		errs.Addf(top, "the inventory lists no controllers and no workers")
	}
	if err := d.errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// decoder holds one inventory document while it is decoded: what was read
// so far, the errors found, and the nodes with the YAML they came from
// (their checks need all of them).
type decoder struct {
	f                    string
	errs                 source.Errors
	c                    *Cluster
	apiVersion, kind     string
	nodes                []pendingNode
	sshNode, vaultSigner *yaml.Node
}

// pendingNode is a node read but not yet checked, with where its fields are.
type pendingNode struct {
	node  Node
	key   *yaml.Node
	attrs map[string]*yaml.Node
}

func (d *decoder) metadata(v *yaml.Node) {
	f, errs := d.f, &d.errs
	source.Fields(f, v, "metadata", errs, map[string]func(*yaml.Node){
		"name": func(v *yaml.Node) {
			d.c.Name = source.String(f, v, "metadata.name", errs)
			for _, msg := range validation.IsDNS1123Label(d.c.Name) {
				errs.Addf(source.At(f, v), "metadata.name %q: %s", d.c.Name, msg)
			}
		},
		"description": func(v *yaml.Node) { source.String(f, v, "metadata.description", errs) },
	})
}

func (d *decoder) ssh(v *yaml.Node) {
	f, errs, c := d.f, &d.errs, d.c
	d.sshNode = v
	source.Fields(f, v, "ssh", errs, map[string]func(*yaml.Node){
		"user":           func(v *yaml.Node) { c.SSH.User = source.String(f, v, "ssh.user", errs) },
		"become":         func(v *yaml.Node) { c.SSH.Become = checkBecome(f, v, "ssh.become", errs) },
		"port":           func(v *yaml.Node) { c.SSH.Port = checkPort(f, v, "ssh.port", errs) },
		"identityFile":   func(v *yaml.Node) { c.SSH.IdentityFile = source.String(f, v, "ssh.identityFile", errs) },
		"agent":          func(v *yaml.Node) { c.SSH.Agent = source.Bool(f, v, "ssh.agent", errs) },
		"knownHostsFile": func(v *yaml.Node) { c.SSH.KnownHostsFile = source.String(f, v, "ssh.knownHostsFile", errs) },
		"vaultSigner": func(v *yaml.Node) {
			vs := &VaultSigner{Mount: "ssh-client-signer"}
			d.vaultSigner = v
			source.Fields(f, v, "ssh.vaultSigner", errs, map[string]func(*yaml.Node){
				"mount": func(v *yaml.Node) { vs.Mount = source.String(f, v, "ssh.vaultSigner.mount", errs) },
				"role":  func(v *yaml.Node) { vs.Role = source.String(f, v, "ssh.vaultSigner.role", errs) },
			})
			if vs.Role == "" {
				errs.Addf(source.At(f, v), "ssh.vaultSigner.role is required")
			}
			c.SSH.VaultSigner = vs
		},
	})
}

func (d *decoder) kubernetes(v *yaml.Node) {
	f, errs, k := d.f, &d.errs, &d.c.Kubernetes
	str := func(field string, dst *string) func(*yaml.Node) {
		return func(v *yaml.Node) { *dst = source.String(f, v, "kubernetes."+field, errs) }
	}
	source.Fields(f, v, "kubernetes", errs, map[string]func(*yaml.Node){
		"kubeconfig": str("kubeconfig", &k.Kubeconfig),
		"context":    str("context", &k.Context),
		"server": func(v *yaml.Node) {
			k.Server = source.String(f, v, "kubernetes.server", errs)
			if u, err := url.Parse(k.Server); err != nil || u.Scheme != "https" || u.Host == "" {
				errs.Addf(source.At(f, v), "kubernetes.server must be an https:// URL, got %q", k.Server)
			}
		},
		"kubeletImage": str("kubeletImage", &k.KubeletImage),
		"runtime": func(v *yaml.Node) {
			k.Runtime = source.String(f, v, "kubernetes.runtime", errs)
			if r := k.Runtime; r != "docker" && r != "podman" {
				errs.Addf(source.At(f, v), "kubernetes.runtime must be docker or podman, got %q", r)
			}
		},
		"clusterDNS":    func(v *yaml.Node) { k.ClusterDNS = source.Strings(f, v, "kubernetes.clusterDNS", errs) },
		"clusterDomain": str("clusterDomain", &k.ClusterDomain),
		"serviceCIDR":   str("serviceCIDR", &k.ServiceCIDR),
		"podCIDR":       str("podCIDR", &k.PodCIDR),
		"version": func(v *yaml.Node) {
			k.Version = source.String(f, v, "kubernetes.version", errs)
			if !strings.HasPrefix(k.Version, "v") {
				errs.Addf(source.At(f, v), "kubernetes.version must look like v1.35.4, got %q", k.Version)
			}
		},
		"imageRepository": str("imageRepository", &k.ImageRepository),
		"etcdImage":       str("etcdImage", &k.EtcdImage),
		"controlPlaneListen": func(v *yaml.Node) {
			k.ControlPlaneListen = source.String(f, v, "kubernetes.controlPlaneListen", errs)
			if l := k.ControlPlaneListen; l != "kubeadm" && l != "node" {
				errs.Addf(source.At(f, v), "kubernetes.controlPlaneListen must be kubeadm or node, got %q", l)
			}
		},
	})
}

func (d *decoder) vault(v *yaml.Node) {
	f, errs, vc := d.f, &d.errs, &d.c.Vault
	str := func(field string, dst *string) func(*yaml.Node) {
		return func(v *yaml.Node) { *dst = source.String(f, v, "vault."+field, errs) }
	}
	source.Fields(f, v, "vault", errs, map[string]func(*yaml.Node){
		"address": func(v *yaml.Node) {
			vc.Address = source.String(f, v, "vault.address", errs)
			if u, err := url.Parse(vc.Address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				errs.Addf(source.At(f, v), "vault.address %q: want an http(s)://HOST:PORT URL", vc.Address)
			}
		},
		"tokenFile": str("tokenFile", &vc.TokenFile),
		"caFile":    str("caFile", &vc.CAFile),
		"pki":       str("pki", &vc.PKI),
		"role":      str("role", &vc.Role),
		"kv":        str("kv", &vc.KV),
	})
}

// maintenance reads the maintenance window (internal/window's Spec),
// checked, an error at the field it is about.
func (d *decoder) maintenance(v *yaml.Node) {
	f, errs := d.f, &d.errs
	var w window.Spec
	at := map[string]*yaml.Node{}
	str := func(field string, dst *string) func(*yaml.Node) {
		return func(v *yaml.Node) { *dst = source.String(f, v, "maintenance."+field, errs); at[field] = v }
	}
	source.Fields(f, v, "maintenance", errs, map[string]func(*yaml.Node){
		"schedule": str("schedule", &w.Schedule),
		"duration": str("duration", &w.Duration),
		"timeZone": str("timeZone", &w.TimeZone),
		"blackouts": func(v *yaml.Node) {
			w.Blackouts = source.Strings(f, v, "maintenance.blackouts", errs)
			at["blackouts"] = v
			for i, e := range v.Content {
				at[fmt.Sprintf("blackouts[%d]", i)] = e
			}
		},
	})
	if w.Schedule == "" {
		errs.Addf(source.At(f, v), "maintenance.schedule is required (a cron schedule, e.g. \"0 2 * * SAT\")")
		return
	}
	if _, err := window.Parse(w); err != nil {
		pos := source.At(f, v)
		var we *window.Error
		if errors.As(err, &we) && at[we.Field] != nil {
			pos = source.At(f, at[we.Field])
		}
		errs.Addf(pos, "maintenance.%v", err)
		return
	}
	d.c.Maintenance = &w
}

// alerts reads the alerts section: the Prometheus URL and the alert
// names, both required and checked as prometheus.alerts checks them, an
// error at the field it is about.
func (d *decoder) alerts(v *yaml.Node) {
	f, errs := d.f, &d.errs
	var a Alerts
	var urlAt, namesAt *yaml.Node
	source.Fields(f, v, "alerts", errs, map[string]func(*yaml.Node){
		"url":   func(v *yaml.Node) { a.URL, urlAt = source.String(f, v, "alerts.url", errs), v },
		"names": func(v *yaml.Node) { a.Names, namesAt = source.Strings(f, v, "alerts.names", errs), v },
	})
	ok := true
	if urlAt == nil {
		errs.Addf(source.At(f, v), "alerts.url is required (the cluster's Prometheus, e.g. http://prometheus.example:9090)")
		ok = false
	} else if err := prometheus.CheckURL(a.URL); err != nil {
		errs.Addf(source.At(f, urlAt), "alerts.url: %v", err)
		ok = false
	}
	if namesAt == nil {
		errs.Addf(source.At(f, v), "alerts.names is required (the alerts that hold a rollout, e.g. [KubeNodeNotReady, etcdMembersDown])")
		ok = false
	} else if err := prometheus.CheckNames(a.Names); err != nil {
		errs.Addf(source.At(f, namesAt), "alerts.names: %v", err)
		ok = false
	}
	if ok {
		d.c.Alerts = &a
	}
}

// backups reads the backups section: destinations by name, each checked
// as etcd.snapshot checks it before use, an error at the field it is
// about.
func (d *decoder) backups(v *yaml.Node) {
	f, errs := d.f, &d.errs
	if v.Kind != yaml.MappingNode {
		errs.Addf(source.At(f, v), "backups must map names to destinations, got %s", source.KindName(v))
		return
	}
	d.c.Backups = map[string]Backup{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		key, val := v.Content[i], v.Content[i+1]
		name := key.Value
		if !etcd.ValidDestinationName(name) {
			errs.Addf(source.At(f, key), "backups.%s: a destination's name is a DNS label (lowercase letters, digits and '-')", name)
			continue
		}
		what := "backups." + name
		if _, dup := d.c.Backups[name]; dup {
			errs.Addf(source.At(f, key), "%s is defined twice", what)
			continue
		}
		var b Backup
		at := map[string]*yaml.Node{}
		str := func(field string, dst *string) func(*yaml.Node) {
			return func(v *yaml.Node) { *dst = source.String(f, v, what+"."+field, errs); at[field] = v }
		}
		source.Fields(f, val, what, errs, map[string]func(*yaml.Node){
			"kind":            str("kind", &b.Kind),
			"path":            str("path", &b.Path),
			"endpoint":        str("endpoint", &b.Endpoint),
			"bucket":          str("bucket", &b.Bucket),
			"region":          str("region", &b.Region),
			"credentialsFile": str("credentialsFile", &b.CredentialsFile),
			"caFile":          str("caFile", &b.CAFile),
			"insecure":        func(v *yaml.Node) { b.Insecure = source.Bool(f, v, what+".insecure", errs); at["insecure"] = v },
		})
		if err := b.Check(); err != nil {
			pos := source.At(f, val)
			var de *etcd.DestinationError
			if errors.As(err, &de) && at[de.Field] != nil {
				pos = source.At(f, at[de.Field])
			}
			errs.Addf(pos, "%s.%v", what, err)
			continue
		}
		d.c.Backups[name] = b
	}
}

// nodeList reads the controllers or workers list.
func (d *decoder) nodeList(role string) func(v *yaml.Node) {
	return func(v *yaml.Node) {
		f, errs := d.f, &d.errs
		if v.Kind != yaml.SequenceNode {
			errs.Addf(source.At(f, v), "%ss must be a list of nodes, got %s", role, source.KindName(v))
			return
		}
		for _, item := range v.Content {
			p := pendingNode{node: Node{Role: role}, key: item, attrs: map[string]*yaml.Node{}}
			n := &p.node
			str := func(field string, dst *string) func(*yaml.Node) {
				return func(v *yaml.Node) { *dst = source.String(f, v, field, errs); p.attrs[field] = v }
			}
			strs := func(field string, dst *[]string) func(*yaml.Node) {
				return func(v *yaml.Node) { *dst = source.Strings(f, v, field, errs); p.attrs[field] = v }
			}
			source.Fields(f, item, role, errs, map[string]func(*yaml.Node){
				"name":     str("name", &n.Name),
				"nodeName": str("nodeName", &n.NodeName),
				"address":  str("address", &n.Address),
				"port":     func(v *yaml.Node) { n.Port = source.Int(f, v, "port", errs); p.attrs["port"] = v },
				"user":     func(v *yaml.Node) { n.User = source.String(f, v, "user", errs) },
				"become":   func(v *yaml.Node) { n.Become = checkBecome(f, v, "become", errs) },
				"labels":   strs("labels", &n.Labels),
				"taints":   strs("taints", &n.Taints),
				"taskQueue": func(v *yaml.Node) {
					n.TaskQueue = source.String(f, v, "taskQueue", errs)
					checkTaskQueue(f, v, n.TaskQueue, errs)
				},
				"fleetLockId": func(v *yaml.Node) {
					n.FleetLockID = source.String(f, v, "fleetLockId", errs)
					if !fleetLockIDRE.MatchString(n.FleetLockID) {
						errs.Addf(source.At(f, v), "fleetLockId %q: 1 to 128 letters, digits, '.', '_' and '-' (Zincati's is its app-specific machine ID, 32 hex digits)", n.FleetLockID)
					}
				},
			})
			d.nodes = append(d.nodes, p)
		}
	}
}

// checkTop checks what the document as a whole must have.
func (d *decoder) checkTop(top source.Pos) {
	f, errs, c := d.f, &d.errs, d.c
	if d.vaultSigner != nil && c.Vault.Address == "" {
		errs.Addf(source.At(f, d.vaultSigner), "ssh.vaultSigner needs the vault section (vault.address)")
	}
	if d.apiVersion != APIVersion {
		errs.Addf(top, "apiVersion must be %q, got %q", APIVersion, d.apiVersion)
	}
	if d.kind != Kind {
		errs.Addf(top, "kind must be %q, got %q", Kind, d.kind)
	}
	if c.Name == "" {
		errs.Addf(top, "metadata.name is required")
	}
	switch {
	case d.sshNode == nil:
		errs.Addf(top, "ssh is required: at least ssh.knownHostsFile (host keys are always verified)")
	case c.SSH.KnownHostsFile == "":
		errs.Addf(source.At(f, d.sshNode), "ssh.knownHostsFile is required: host keys are always verified")
	case c.SSH.IdentityFile == "" && !c.SSH.Agent && c.SSH.VaultSigner == nil:
		errs.Addf(source.At(f, d.sshNode), "ssh needs identityFile, agent: true or vaultSigner")
	case c.SSH.IdentityFile != "" && c.SSH.Agent:
		errs.Addf(source.At(f, d.sshNode), "ssh.identityFile and ssh.agent are exclusive")
	}
}

// checkNodes checks each node and the nodes together (unique names,
// Node names and addresses), and files them as controllers and workers.
func (d *decoder) checkNodes() {
	f, errs, c := d.f, &d.errs, d.c
	names := map[string]source.Pos{}
	type kubeName struct {
		pos      source.Pos
		explicit bool
	}
	kubeNames := map[string]kubeName{}
	addrs := map[string]source.Pos{}
	for _, p := range d.nodes {
		n := p.node
		at := func(field string) source.Pos {
			if v, ok := p.attrs[field]; ok {
				return source.At(f, v)
			}
			return source.At(f, p.key)
		}
		if n.Name == "" {
			errs.Addf(at("name"), "%s: name is required", n.Role)
		} else {
			for _, msg := range validation.IsDNS1123Label(n.Name) {
				errs.Addf(at("name"), "%s name %q: %s", n.Role, n.Name, msg)
			}
			if prev, dup := names[n.Name]; dup {
				errs.Addf(at("name"), "duplicate node name %q (first at %s)", n.Name, prev)
			} else {
				names[n.Name] = at("name")
			}
		}
		if n.NodeName != "" {
			for _, msg := range validation.IsDNS1123Subdomain(n.NodeName) {
				errs.Addf(at("nodeName"), "%s %s: nodeName %q: %s", n.Role, n.Name, n.NodeName, msg)
			}
		}
		// Two nodes with one Node name: said here when a nodeName makes
		// it so (the same name twice is said above).
		if kn := n.KubeName(); kn != "" {
			if prev, dup := kubeNames[kn]; dup && (n.NodeName != "" || prev.explicit) {
				errs.Addf(at("nodeName"), "%s %s: Node name %q is another node's too (first at %s)", n.Role, n.Name, kn, prev.pos)
			} else if !dup {
				kubeNames[kn] = kubeName{at("nodeName"), n.NodeName != ""}
			}
		}
		if n.Address == "" {
			errs.Addf(at("address"), "%s %s: address is required", n.Role, n.Name)
		} else if net.ParseIP(n.Address) == nil && len(validation.IsDNS1123Subdomain(n.Address)) > 0 {
			// It is dialled, and certificates for the host name it.
			errs.Addf(at("address"), "%s %s: address %q is neither an IP address nor a DNS name (lower case letters, digits, '-' and '.')", n.Role, n.Name, n.Address)
		} else {
			key := fmt.Sprintf("%s:%d", n.Address, cmp.Or(n.Port, c.SSH.Port, target.DefaultPort))
			if prev, dup := addrs[key]; dup {
				errs.Addf(at("address"), "duplicate address %s for node %s (first at %s)", key, n.Name, prev)
			} else {
				addrs[key] = at("address")
			}
		}
		if v, ok := p.attrs["port"]; ok {
			checkPort(f, v, "port", errs)
		}
		if n.Role == RoleController {
			d.checkControllerLabels(n, at)
			continue
		}
		for i, l := range n.Labels {
			if err := ValidateLabel(l); err != nil {
				errs.Addf(source.At(f, p.attrs["labels"].Content[i]), "worker %s: %v", n.Name, err)
			}
		}
		for i, t := range n.Taints {
			if err := ValidateTaint(t); err != nil {
				errs.Addf(source.At(f, p.attrs["taints"].Content[i]), "worker %s: %v", n.Name, err)
			}
		}
		c.Workers = append(c.Workers, n)
	}
	for _, p := range d.nodes {
		if p.node.Role == RoleController {
			c.Controllers = append(c.Controllers, p.node)
		}
	}
}

func (d *decoder) checkControllerLabels(n Node, at func(string) source.Pos) {
	if len(n.Labels) > 0 {
		d.errs.Addf(at("labels"), "controller %s: labels are only allowed on workers (controllers are never labelled by the inventory)", n.Name)
	}
	if len(n.Taints) > 0 {
		d.errs.Addf(at("taints"), "controller %s: taints are only allowed on workers (controllers are never tainted by the inventory)", n.Name)
	}
}

// Values of ssh.become and a node's become.
const (
	BecomeSudo = "sudo"
	BecomeNone = "none"
)

func checkBecome(f string, v *yaml.Node, what string, errs *source.Errors) string {
	b := source.String(f, v, what, errs)
	if b != BecomeSudo && b != BecomeNone {
		errs.Addf(source.At(f, v), "%s must be sudo or none, got %q", what, b)
	}
	return b
}

func checkPort(f string, v *yaml.Node, what string, errs *source.Errors) int {
	p := source.Int(f, v, what, errs)
	if p < 1 || p > 65535 {
		errs.Addf(source.At(f, v), "%s %d is out of range 1-65535", what, p)
	}
	return p
}

func checkTaskQueue(f string, v *yaml.Node, name string, errs *source.Errors) {
	if err := ValidateTaskQueue(name); err != nil {
		errs.Addf(source.At(f, v), "%v", err)
	}
}

var taskQueuePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$`)

// ValidateTaskQueue checks a task queue name: 1-200 letters, digits, '-',
// '_', '.', ':' or '/', starting with a letter or digit (so never one of
// Temporal's reserved /_sys/ queues).
func ValidateTaskQueue(name string) error {
	if !taskQueuePattern.MatchString(name) {
		return fmt.Errorf("taskQueue %q: want 1-200 letters, digits, '-', '_', '.', ':' or '/', starting with a letter or digit", name)
	}
	return nil
}

// ValidateLabel checks a `key=value` node label.
func ValidateLabel(s string) error {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("label %q must be key=value", s)
	}
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return fmt.Errorf("label %q: key %s", s, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return fmt.Errorf("label %q: value %s", s, strings.Join(msgs, "; "))
	}
	return nil
}

// TaintEffects are the effects a taint may have.
var TaintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// ValidateTaint checks a `key=value:Effect` (or `key:Effect`) node taint.
func ValidateTaint(s string) error {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("taint %q must be key=value:Effect", s)
	}
	if !slices.Contains(TaintEffects, effect) {
		return fmt.Errorf("taint %q: effect %q must be one of %s", s, effect, strings.Join(TaintEffects, ", "))
	}
	key, value, _ := strings.Cut(kv, "=")
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return fmt.Errorf("taint %q: key %s", s, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return fmt.Errorf("taint %q: value %s", s, strings.Join(msgs, "; "))
	}
	return nil
}
