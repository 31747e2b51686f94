package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// Cluster-wide actions: they work on the API server, not on one node.
const (
	CreateBootstrapTokenAction = "kube.create-bootstrap-token"
	DeleteBootstrapTokenAction = "kube.delete-bootstrap-token"
	BootstrapRBACAction        = "kube.bootstrap-rbac"
	WaitAPIServerAction        = "kube.wait-apiserver"
	ClusterInfoAction          = "kube.cluster-info"
	SaveKubeconfigAction       = "kube.save-kubeconfig"
)

// CreateBootstrapTokenInput mints a bootstrap token.
type CreateBootstrapTokenInput struct {
	Cluster     target.Kube `json:"cluster"`
	TTL         string      `json:"ttl,omitempty" kedge:"duration" doc:"how long the token is valid (default 15m, at most 24h); none with node"`
	Description string      `json:"description,omitempty" doc:"why the token exists, stored in its Secret"`
	ForNode     string      `json:"forNode,omitempty" doc:"the Node this token stays with as its bootstrap credential: no expiry, labelled kedge.dev/bootstrap-node, replacing that Node's earlier one; revoked by kube.delete-bootstrap-token with forNode (node-remove). As Typhoon's nodes keep theirs: a kubelet whose client certificate lapsed bootstraps again"`
}

// BootstrapTokenResult is the token minted. Token is a credential: it
// only travels sealed by the payload codec.
type BootstrapTokenResult struct {
	TokenID string `json:"tokenID"`
	Token   string `json:"token"`
	Expires string `json:"expires"` // "" for a standing token (node)
	Secret  string `json:"secret"`  // namespace/name of the Secret holding it
}

// DeleteBootstrapTokenInput revokes a bootstrap token.
type DeleteBootstrapTokenInput struct {
	Cluster target.Kube `json:"cluster"`
	TokenID string      `json:"tokenID,omitempty" doc:"the token's id (the part before the dot); or node"`
	ForNode string      `json:"forNode,omitempty" doc:"instead of tokenID: every standing token of this Node (kube.create-bootstrap-token's forNode)"`
}

// ChangedResult says whether the action changed anything.
type ChangedResult struct {
	Changed bool `json:"changed"`
}

// BootstrapRBACInput names the group joining kubelets authenticate as.
type BootstrapRBACInput struct {
	Cluster target.Kube `json:"cluster"`
}

// WaitAPIServerInput waits for the API server.
type WaitAPIServerInput struct {
	Cluster target.Kube `json:"cluster"`
	Timeout string      `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 5m)"`
	// Address asks one API server (host:port) instead of the
	// kubeconfig's: the controller just restarted. Its certificate is
	// still checked against the kubeconfig's CA and server name.
	Address string `json:"address,omitempty" doc:"host:port of one API server to ask instead of the kubeconfig's server, e.g. a controller just restarted (its certificate must still name the kubeconfig's server)"`
	// ServerName is the name Address's certificate must carry instead
	// of the kubeconfig's server: a controller that joined, whose
	// certificate names its own address (still checked against the
	// kubeconfig's CA).
	ServerName string `json:"serverName,omitempty" doc:"with address: the DNS name or IP its certificate must name instead of the kubeconfig's server (e.g. a new controller's own address)"`
	// Version waits until the server answers /version with this
	// release (an upgraded API server): ready is not enough, the old one
	// is ready too until the kubelet restarts it.
	Version string `json:"version,omitempty" doc:"and until /version answers this release (e.g. v1.36.3), as an upgraded API server does"`
}

// WaitAPIServerResult reports the server once it is ready.
type WaitAPIServerResult struct {
	Version string `json:"version"`
}

// ClusterInfoInput asks how nodes reach the API server.
type ClusterInfoInput struct {
	Cluster target.Kube `json:"cluster"`
}

// ClusterInfoResult is the API server's URL and CA bundle as the
// inventory's kubeconfig has them.
type ClusterInfoResult struct {
	Server string `json:"server"`
	CACert string `json:"caCert"`
}

// SaveKubeconfigInput keeps a kubeconfig where the inventory's
// kubernetes.kubeconfig names it.
type SaveKubeconfigInput struct {
	Cluster target.Kube `json:"cluster"`
	Content string      `json:"content" kedge:"required" doc:"the kubeconfig: https servers with certificate-authority-data, users with client-certificate-data and client-key-data only (what render.kubeconfig makes of the admin certificate a bootstrap issued); its servers must be the inventory's"`
}

func init() {
	spec.Register(spec.Row{Name: CreateBootstrapTokenAction, Doc: "mint a short-lived bootstrap token (a Secret in kube-system) for one kubelet TLS bootstrap",
		In: CreateBootstrapTokenInput{}, Out: BootstrapTokenResult{}, Timeout: 30 * time.Second,
		Summary: `create a bootstrap token`})
}

func init() {
	spec.Register(spec.Row{Name: DeleteBootstrapTokenAction, Doc: "revoke a bootstrap token (delete its Secret); a token already gone is fine",
		In: DeleteBootstrapTokenInput{}, Out: ChangedResult{}, Timeout: 30 * time.Second,
		Summary: `delete the bootstrap token`})
}

func init() {
	spec.Register(spec.Row{Name: BootstrapRBACAction, Doc: "bind the TLS bootstrap roles: joining kubelets may request client certificates, which are approved automatically",
		In: BootstrapRBACInput{}, Out: ChangedResult{}, Timeout: 30 * time.Second,
		Summary: `apply the TLS bootstrap RBAC`})
}

func init() {
	spec.Register(spec.Row{Name: WaitAPIServerAction, Doc: "wait until the API server answers /readyz",
		In: WaitAPIServerInput{}, Out: WaitAPIServerResult{}, Timeout: 30 * time.Minute,
		Summary: `wait for the API server`})
}

func init() {
	spec.Register(spec.Row{Name: ClusterInfoAction, Doc: "the API server URL and CA bundle of the inventory's kubeconfig",
		In: ClusterInfoInput{}, Out: ClusterInfoResult{}, Timeout: 30 * time.Second,
		Summary: `read the cluster info`})
}

func init() {
	spec.Register(spec.Row{Name: SaveKubeconfigAction, Doc: "write a kubeconfig where the inventory's kubernetes.kubeconfig names it, on the worker (mode 0600)",
		In: SaveKubeconfigInput{}, Out: ChangedResult{}, Timeout: 30 * time.Second,
		Summary: `save the admin kubeconfig`})
}
