package vault

import "kedge.dev/kedge/actions/target"

// The inputs and results below are no action's: they are what pki.adopt
// asks of the Vault implementation (activities/vaultapi) through pki.Vault,
// declared here so activities/pkihost needs no other activity package.

// ImportCAInput is a CA a cluster already has, to be kept in Vault.
type ImportCAInput struct {
	Vault target.Vault
	// Path is the KV path that records the CA, the one vault.cluster-ca
	// reads (kedge/clusters/NAME/ca).
	Path        string
	Certificate string // PEM
	PrivateKey  string // PEM
	// KeyInVault records the CA as one only Vault signs with (etcd's): its
	// key is kept in the PKI mount alone, not in KV.
	KeyInVault bool
	// From says where the CA came from (HOST:PATH), kept beside it.
	From string
}

// ImportCAResult is the CA as Vault keeps it.
type ImportCAResult struct {
	Certificate string
	Issuer      string
	Created     bool
}

// ImportKeyPairInput is a key pair a cluster already uses (its
// service-account signing key), to be kept in Vault.
type ImportKeyPairInput struct {
	Vault      target.Vault
	Path       string // the KV path vault.key-pair reads
	PrivateKey string // PEM
	PublicKey  string // PEM
	From       string
}
