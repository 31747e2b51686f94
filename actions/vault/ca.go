package vault

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// Cluster key material kept in Vault.
const (
	ClusterCAAction = "vault.cluster-ca"
	KeyPairAction   = "vault.key-pair"
)

// ClusterCAInput asks for the cluster's signing CA.
type ClusterCAInput struct {
	Vault      target.Vault `json:"vault"`
	Path       string       `json:"path" kedge:"required" doc:"KV path that keeps the CA, e.g. kedge/clusters/mercury/ca"`
	CommonName string       `json:"commonName" kedge:"required" doc:"the CA's CN, e.g. mercury kubernetes CA"`
	TTL        string       `json:"ttl,omitempty" kedge:"duration" doc:"the CA's lifetime (default 87600h)"`
	// KeyInVault makes the CA's key inside Vault, where it stays: for a
	// CA nobody but Vault signs with, such as etcd's. The result's
	// PrivateKey is then empty and KV keeps only the certificate and the
	// issuer.
	KeyInVault bool `json:"keyInVault,omitempty" doc:"make the key inside Vault and never export it (a CA only Vault signs with, e.g. etcd's); privateKey is then empty"`
	// MustExist refuses to make the CA: a cluster Kedge adopted signs
	// with its own CA or not at all.
	MustExist bool `json:"mustExist,omitempty" doc:"fail (NotAdopted) instead of making a CA when Vault keeps none at path: for clusters Kedge adopted"`
}

// ClusterCAResult is the cluster CA. PrivateKey is sealed by the payload
// codec in Temporal; it goes to the controllers only (the
// controller-manager signs kubelet certificates with it). It is empty for
// a CA made with KeyInVault.
type ClusterCAResult struct {
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"privateKey"`
	// Issuer is the CA's issuer id in the PKI mount: vault.issue-cert with
	// this issuer signs with this CA.
	Issuer  string `json:"issuer"`
	Created bool   `json:"created"`
}

// KeyPairInput asks for a key pair kept in Vault.
type KeyPairInput struct {
	Vault target.Vault `json:"vault"`
	Path  string       `json:"path" kedge:"required" doc:"KV path that keeps the key pair, e.g. kedge/clusters/mercury/service-account"`
	// MustExist refuses to make the key pair: a rotation reads the one in
	// use, and a key pair made before adopt would block adopt (it
	// records the cluster's own).
	MustExist bool `json:"mustExist,omitempty" doc:"fail (NotAdopted) instead of making a key pair when Vault keeps none at path"`
}

// KeyPairResult is a PEM private key (sealed in Temporal) and its public
// key.
type KeyPairResult struct {
	PrivateKey string `json:"privateKey"`
	PublicKey  string `json:"publicKey"`
	Created    bool   `json:"created"`
}

func init() {
	spec.Register(spec.Row{Name: ClusterCAAction, Doc: "one of the cluster's CAs from Vault, made on first use (an intermediate under the PKI root; its key kept in KV, or never out of Vault with keyInVault: etcd's CA)",
		In: ClusterCAInput{}, Out: ClusterCAResult{}, Timeout: time.Minute,
		Summary: `ensure the cluster CA at {{.In "path"}}`})
}

func init() {
	spec.Register(spec.Row{Name: KeyPairAction, Doc: "an ECDSA key pair kept in Vault KV, made on first use (e.g. the service-account signing key)",
		In: KeyPairInput{}, Out: KeyPairResult{}, Timeout: time.Minute,
		Summary: `ensure the key pair at {{.In "path"}}`})
}
