package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// The Kubernetes-API actions of a CA rotation (docs/ca-rotation.md).
const (
	KubeletClientCertAction = "kube.kubelet-client-cert"
	WaitRootCAAction        = "kube.wait-root-ca"
	CheckNodesAction        = "kube.check-nodes"
)

// KubeletClientCertInput asks for a kubelet's new client certificate
// through a CertificateSigningRequest the controller manager signs.
// NodeName is the Node's name, not a step's `on:` host: the action works
// on the cluster as a whole.
type KubeletClientCertInput struct {
	Cluster  target.Kube `json:"cluster"`
	NodeName string      `json:"nodeName" kedge:"required" doc:"the Node's name: the certificate is for system:node:NAME in group system:nodes"`
	CACert   string      `json:"caCert" kedge:"required" doc:"the CA the signed certificate must chain to (PEM), e.g. the new cluster CA once the controller manager's signer is switched"`
	Timeout  string      `json:"timeout,omitempty" kedge:"duration" doc:"give up waiting for the signature after this long (default 2m)"`
}

// KubeletClientCertResult is the signed certificate and its key, made on
// the worker. PrivateKey is sealed by the payload codec in Temporal; it
// is never logged.
type KubeletClientCertResult struct {
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"privateKey"`
	NotAfter    string `json:"notAfter"`
	Serial      string `json:"serial"`
	CSRName     string `json:"csrName"`
}

// WaitRootCAInput names the CA bundle every namespace's kube-root-ca.crt
// ConfigMap must hold.
type WaitRootCAInput struct {
	Cluster target.Kube `json:"cluster"`
	Bundle  string      `json:"bundle" kedge:"required" doc:"the certificates (PEM) every kube-root-ca.crt must hold in ca.crt, no more and no fewer, in any order"`
	Timeout string      `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 3m)"`
	// Settle is how long to wait once every ConfigMap holds the bundle:
	// kubelets refresh the copies mounted in running pods on their own
	// period (syncFrequency, 1m by default), and nothing reports when.
	Settle string `json:"settle,omitempty" kedge:"duration" doc:"then wait this long for kubelets to refresh the copies mounted in running pods (their syncFrequency, 1m by default; default 0)"`
}

// WaitRootCAResult is how many namespaces hold the bundle.
type WaitRootCAResult struct {
	Namespaces int `json:"namespaces"`
}

// CheckNodesInput lists the Nodes that must all exist and be Ready.
type CheckNodesInput struct {
	Cluster target.Kube `json:"cluster"`
	Nodes   []string    `json:"nodes" kedge:"required" doc:"Node names: every one must exist and be Ready"`
	// Only refuses a cluster with Nodes not in the list: a step that must
	// reach every kubelet (a CA rotation) would leave those behind.
	Only bool `json:"only,omitempty" doc:"also refuse when the cluster has a Node not in nodes (one the inventory does not name would be left out)"`
}

// CheckNodesResult lists the Nodes found Ready (all of them).
type CheckNodesResult struct {
	Ready []string `json:"ready"`
}

func init() {
	spec.Register(spec.Row{Name: KubeletClientCertAction, Doc: "a new client certificate for a node's kubelet through a CertificateSigningRequest the controller manager signs (kubernetes.io/kube-apiserver-client-kubelet): an ECDSA key made on the worker, the CSR approved by Kedge, the certificate checked to be for that key and to chain to caCert (ForeignIssuer otherwise: the signer is not switched); a denied or failed CSR is refused (CertificateRequestRefused); the CSR is deleted when done; the key stays sealed in Temporal",
		In: KubeletClientCertInput{}, Out: KubeletClientCertResult{}, Timeout: 10 * time.Minute,
		Summary: `issue a kubelet client certificate through a CSR`})
}

func init() {
	spec.Register(spec.Row{Name: WaitRootCAAction, Doc: "wait until every namespace's kube-root-ca.crt ConfigMap holds exactly the bundle's certificates (in any order; namespaces being deleted are not waited for); on timeout names up to 5 namespaces that do not and what they hold",
		In: WaitRootCAInput{}, Out: WaitRootCAResult{}, Timeout: 30 * time.Minute,
		Summary: `wait until every namespace's kube-root-ca.crt holds the bundle`})
}

func init() {
	spec.Register(spec.Row{Name: CheckNodesAction, Doc: "refuse, before anything changes, unless every Node named exists and is Ready (NodeNotReady, not retried, naming each missing or not Ready with its Ready condition's reason)",
		In: CheckNodesInput{}, Out: CheckNodesResult{}, Timeout: 3 * time.Minute,
		Summary: `check {{.Count "nodes" "node"}} exist and are Ready`})
}
