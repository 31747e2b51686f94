package pki

import (
	"time"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// RotateCAAction moves one host's trust and certificates a stage of a CA
// rotation further (docs/ca-rotation.md).
const RotateCAAction = "pki.rotate-ca"

// The stages of a CA rotation a host goes through, in order.
const (
	// StageTrust: every trust point holds the CA in use and its
	// successor; the controller manager's CSR signer gets files of its
	// own first where it shares one with a trust point.
	StageTrust = "trust"
	// StageReissue: the signer and every certificate the CA in use
	// signed come from its successor; the trust points still hold both.
	StageReissue = "reissue"
	// StageDrop: the trust points hold the successor alone.
	StageDrop = "drop"
)

// The parts of a host a rotation touches in one step.
const (
	// ScopeControlPlane: etcd, the API server, the controller manager,
	// the scheduler and the admin kubeconfig of a controller.
	ScopeControlPlane = "control-plane"
	// ScopeKubelet: the kubelet of any node (its kubeconfigs' CA data,
	// its client CA, its client certificate).
	ScopeKubelet = "kubelet"
)

// CARotation is one CA being replaced. Empty when that CA is not rotated.
type CARotation struct {
	Old    string `json:"old,omitempty" doc:"the CA in use (PEM)"`
	New    string `json:"new,omitempty" doc:"its successor (PEM), as vault.stage-ca made it"`
	Issuer string `json:"issuer,omitempty" doc:"the successor's Vault issuer: reissued certificates come from it"`
	// Key is the successor's private key, for the cluster CA only: the
	// controller manager signs kubelets' CSRs with it on the host.
	Key string `json:"key,omitempty" doc:"the successor's private key (PEM), the cluster CA's only: the controller manager's CSR signer"`
}

// KeyRotation is the service-account key being replaced.
type KeyRotation struct {
	OldPublic  string `json:"oldPublic,omitempty" doc:"the public key in use (PEM)"`
	NewPublic  string `json:"newPublic,omitempty" doc:"its successor's public key (PEM)"`
	NewPrivate string `json:"newPrivate,omitempty" doc:"its successor's private key (PEM): the API server and controller manager sign tokens with it from the reissue stage on"`
}

// KubeletClient is a kubelet's new client certificate and key
// (kube.kubelet-client-cert's), installed in the reissue stage.
type KubeletClient struct {
	Certificate string `json:"certificate,omitempty"`
	PrivateKey  string `json:"privateKey,omitempty"`
}

// RotateCAInput names a host, the stage it is to reach and the CAs being
// replaced.
type RotateCAInput struct {
	Target         target.SSH              `json:"target"`
	Vault          target.Vault            `json:"vault"`
	Stage          string                  `json:"stage" kedge:"required" doc:"trust, reissue or drop"`
	Scope          string                  `json:"scope" kedge:"required" doc:"control-plane (a controller's etcd, API server, controller manager, scheduler and admin kubeconfig) or kubelet (any node's kubelet)"`
	Files          map[string]string       `json:"files" kedge:"required" doc:"the host's files as host.layout reports them"`
	StaticPods     map[string]string       `json:"staticPods,omitempty" doc:"the host's static pod manifests as host.layout reports them (the controller manager's flags name its signer)"`
	Kind           string                  `json:"kind,omitempty" doc:"the host's layout (host.layout's kind): files the rotation creates get its documented modes"`
	RunAs          map[string]layout.RunAs `json:"runAs,omitempty" doc:"who each component runs as (host.layout's runAs), for the readers of what is installed"`
	APIServer      string                  `json:"apiServer,omitempty" doc:"a DNS name the API server's serving certificate must hold"`
	TTL            string                  `json:"ttl,omitempty" kedge:"duration" doc:"lifetime of reissued certificates (default 8760h), never past their CA's end"`
	ClusterCA      CARotation              `json:"clusterCA,omitempty" doc:"the cluster CA being replaced, if it is"`
	EtcdCA         CARotation              `json:"etcdCA,omitempty" doc:"etcd's CA being replaced, if it is"`
	FrontProxyCA   CARotation              `json:"frontProxyCA,omitempty" doc:"the front-proxy (aggregation) CA being replaced, if it is"`
	ServiceAccount KeyRotation             `json:"serviceAccount,omitempty" doc:"the service-account key being replaced, if it is"`
	KubeletClient  KubeletClient           `json:"kubeletClient,omitempty" doc:"kubelet scope, reissue stage: the kubelet's new client certificate and key"`
}

// RotateCAResult says what changed on the host. Files, Backup, Created and
// Changed are host.install-bundle's: host.restore-bundle undoes the step.
type RotateCAResult struct {
	Changed bool     `json:"changed"`
	Files   []string `json:"files"`
	Backup  string   `json:"backup"`
	Created []string `json:"created"`
	// Restart lists the components to restart for the change to take
	// effect, from etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kubelet.
	Restart []string `json:"restart"`
	// Reissued lists the certificates issued anew (by path).
	Reissued []string `json:"reissued"`
	// Readers are the installed files with who reads them, for
	// host.check-readable.
	Readers []host.FileReader `json:"readers"`
}

func init() {
	spec.Register(spec.Row{Name: RotateCAAction, Doc: "move one host a stage of a CA rotation further: trust (every trust point holds the old and the new CA; the CSR signer gets files of its own first), reissue (the signer and every certificate the old CA signed come from the new one; the new service-account key signs) or drop (the new CA alone); one bundle, all or none, modes and owners kept (undo with host.restore-bundle); restart lists what must restart",
		In: RotateCAInput{}, Out: RotateCAResult{}, Timeout: 5 * time.Minute,
		Summary: `move trust and certificates a CA rotation stage further{{.On}}`})
}
