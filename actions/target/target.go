package target

// SSH says how to reach one host. The workflow builds it from the
// inventory snapshot and hands it to every host action, so activities never
// read the inventory themselves.
type SSH struct {
	// Cluster is the inventory's cluster name: the worker checks the rest
	// against its own inventory of that cluster before connecting.
	Cluster string `json:"cluster,omitempty"`
	// Node is the inventory name of the host; it names the host in errors.
	Node string `json:"node"`
	// Address is the IP address or DNS name sshd listens on.
	Address string `json:"address,omitempty"`
	// Port defaults to 22.
	Port int `json:"port,omitempty"`
	// User defaults to root.
	User string `json:"user,omitempty"`
	// Become is how the login user runs privileged work: "" (it is root,
	// or the work needs no privilege) or BecomeSudo. With sudo, every
	// command and file operation runs as root through `sudo -n`, checked
	// once per connection.
	Become string `json:"become,omitempty"`
	// IdentityFile is a private key on the worker's machine. When empty,
	// the SSH agent at $SSH_AUTH_SOCK is used.
	IdentityFile string `json:"identityFile,omitempty"`
	// KnownHostsFile is the known_hosts file on the worker's machine that
	// the host key is verified against. It is required: host keys are
	// always verified.
	KnownHostsFile string `json:"knownHostsFile,omitempty"`
	// VaultCA, when set, has the worker log in with a short-lived
	// certificate signed by Vault's SSH CA instead of IdentityFile.
	VaultCA *VaultCA `json:"vaultCA,omitempty"`
}

// BecomeSudo is the one privilege escalation Kedge knows: the login user
// runs privileged commands through `sudo -n` (never a password prompt).
const BecomeSudo = "sudo"

// VaultCA names the Vault SSH secrets engine role that signs the worker's
// login certificates. The token is read from TokenFile (or $VAULT_TOKEN)
// on the worker.
type VaultCA struct {
	Address   string `json:"address"`
	TokenFile string `json:"tokenFile,omitempty"`
	CAFile    string `json:"caFile,omitempty"`
	Mount     string `json:"mount"`
	Role      string `json:"role"`
}

// Vault says how the worker reaches a cluster's Vault: the inventory's
// vault section.
type Vault struct {
	// Cluster is set on an action's input (never in an inventory file):
	// the cluster whose Vault this is, so the worker can check the rest
	// against its own inventory of it.
	Cluster   string `json:"cluster,omitempty"`
	Address   string `json:"address,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	CAFile    string `json:"caFile,omitempty"`
	PKI       string `json:"pki,omitempty"`  // PKI mount, default "pki"
	Role      string `json:"role,omitempty"` // PKI role, default "kubernetes"
	KV        string `json:"kv,omitempty"`   // KV v2 mount, default "secret"
}

// Kube says how the worker reaches a cluster's API server: the kubeconfig
// (and context) the inventory names, on the worker.
type Kube struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
}

// The SSH defaults, for a target (or an inventory) that does not say.
const (
	DefaultPort = 22
	DefaultUser = "root"
)

// PortOrDefault is the port sshd listens on.
func (t SSH) PortOrDefault() int {
	if t.Port == 0 {
		return DefaultPort
	}
	return t.Port
}

// UserOrDefault is the user the worker logs in as.
func (t SSH) UserOrDefault() string {
	if t.User == "" {
		return DefaultUser
	}
	return t.User
}

// Ref is the reference a run carries instead of the target itself: which
// cluster, which host. The worker fills in the rest from its own
// inventory of that cluster.
func (t SSH) Ref() SSH { return SSH{Cluster: t.Cluster, Node: t.Node} }

// Name names the host in messages: its inventory name, else its address.
func (t SSH) Name() string {
	if t.Node != "" {
		return t.Node
	}
	return t.Address
}
