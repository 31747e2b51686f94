package sshpool

// Target says how to reach one host. The workflow builds it from the
// inventory snapshot and hands it to every host action, so activities never
// read the inventory themselves.
type Target struct {
	// Cluster is the inventory's cluster name: the worker checks the rest
	// against its own inventory of that cluster before connecting.
	Cluster string `json:"cluster,omitempty"`
	// Node is the inventory name of the host; it names the host in errors.
	Node string `json:"node"`
	// Address is the IP address or DNS name sshd listens on.
	Address string `json:"address"`
	// Port defaults to 22.
	Port int `json:"port,omitempty"`
	// User defaults to root.
	User string `json:"user,omitempty"`
	// Become is how the login user runs privileged work: "" (it is root,
	// or the work needs no privilege) or BecomeSudo. With sudo, every
	// command and file operation runs as root through `sudo -n`, checked
	// once per connection: a user without passwordless sudo is refused
	// with ErrPrivilege before anything runs.
	Become string `json:"become,omitempty"`
	// IdentityFile is a private key on the worker's machine. When empty,
	// the SSH agent at $SSH_AUTH_SOCK is used.
	IdentityFile string `json:"identityFile,omitempty"`
	// KnownHostsFile is the known_hosts file on the worker's machine that
	// the host key is verified against. It is required: host keys are
	// always verified.
	KnownHostsFile string `json:"knownHostsFile"`
	// VaultCA, when set, has the worker log in with a short-lived
	// certificate signed by Vault's SSH CA (see Options.Signers) instead
	// of IdentityFile.
	VaultCA *VaultCA `json:"vaultCA,omitempty"`
}

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
