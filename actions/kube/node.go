package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// Action names, as runbooks spell them.
const (
	CordonAction     = "kube.cordon"
	UncordonAction   = "kube.uncordon"
	DrainAction      = "kube.drain"
	DeleteNodeAction = "kube.delete-node"
	GetNodeAction    = "kube.get-node"
	WaitNodeAction   = "kube.wait-node"
	LabelTaintAction = "kube.label-taint"
	// DeleteLostNodeAction deletes a Node by its name, which need not be
	// a host of the inventory: the Node of a host that is gone.
	DeleteLostNodeAction = "kube.delete-lost-node"
)

// Every input names the cluster it acts on (json "cluster", a target.Kube
// the workflow fills from the inventory's `kubernetes:` section) and the
// node actions the node (json "node"), which the workflow fills from the
// step's `on:` host.

// NodeInput is the input of kube.cordon, kube.uncordon and kube.delete-node.
type NodeInput struct {
	Cluster target.Kube `json:"cluster"`
	Node    string      `json:"node"`
}

// NodeResult says whether the action changed the node.
type NodeResult struct {
	Changed bool `json:"changed"`
}

// GetNodeResult is a Node's state; Exists is false when there is none.
type GetNodeResult struct {
	Exists         bool   `json:"exists"`
	Ready          bool   `json:"ready"`
	Unschedulable  bool   `json:"unschedulable"`
	KubeletVersion string `json:"kubeletVersion"`
	InternalIP     string `json:"internalIP,omitempty"`
}

// DrainInput evicts a node's pods.
type DrainInput struct {
	Cluster            target.Kube `json:"cluster"`
	Node               string      `json:"node"`
	Timeout            string      `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 5m; never infinite)"`
	GracePeriodSeconds int         `json:"gracePeriodSeconds,omitempty" doc:"pod termination grace period (default: each pod's own)"`
	DeleteEmptyDirData bool        `json:"deleteEmptyDirData,omitempty" doc:"evict pods using emptyDir volumes (their data is lost)"`
	Force              bool        `json:"force,omitempty" doc:"also delete pods no controller manages"`
	RetryDelay         string      `json:"retryDelay,omitempty" kedge:"duration" doc:"wait between evictions a PodDisruptionBudget refused (default 5s)"`
}

// DrainResult lists the pods evicted.
type DrainResult struct {
	Evicted []string `json:"evicted"`
}

// WaitNodeInput waits for a node to be Ready.
type WaitNodeInput struct {
	Cluster        target.Kube `json:"cluster"`
	Node           string      `json:"node"`
	KubeletVersion string      `json:"kubeletVersion,omitempty" doc:"also wait until the kubelet reports this version (e.g. v1.35.4)"`
	// ReadyAfter, an RFC 3339 time from the node's own clock (e.g.
	// host.systemd's startedAt), makes a Ready condition count only when
	// its last heartbeat is not earlier (heartbeats have whole seconds):
	// a status the old kubelet posted before a restart is not the new
	// kubelet's.
	ReadyAfter string `json:"readyAfter,omitempty" doc:"count Ready only when its last heartbeat is not earlier than this RFC 3339 time (e.g. the restart's startedAt)"`
	// BootID, after a reboot, makes Ready count only once the Node
	// reports that boot (status.nodeInfo.bootID, which the kubelet reads
	// as it starts): a status the kubelet of the boot before posted, even
	// within the reboot's own second, is not the rebooted node's.
	BootID string `json:"bootId,omitempty" doc:"count Ready only once the Node reports this boot ID (status.nodeInfo.bootID), e.g. host.reboot's bootId: posted by the kubelet of that boot"`
	// LeaseAfter, an RFC 3339 time, also waits for the kubelet to renew
	// the Node's Lease (kube-node-lease) at or after it: the kubelet
	// reaches the API as it is now. After an etcd restore the Node's
	// Ready condition is the snapshot's, posted long before; the Lease is
	// renewed every 10 s.
	LeaseAfter string `json:"leaseAfter,omitempty" doc:"also wait until the kubelet renews the Node's Lease at or after this RFC 3339 time (e.g. after an etcd restore, when the API servers started)"`
	Timeout    string `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 5m)"`
}

// WaitNodeResult reports the node once it is Ready.
type WaitNodeResult struct {
	Ready          bool   `json:"ready"`
	KubeletVersion string `json:"kubeletVersion"`
}

// LabelTaintInput applies labels and taints to a node.
type LabelTaintInput struct {
	Cluster target.Kube `json:"cluster"`
	Node    string      `json:"node"`
	Labels  []string    `json:"labels,omitempty" doc:"key=value labels to set"`
	Taints  []string    `json:"taints,omitempty" doc:"key=value:Effect taints to add"`
}

// DeleteLostNodeInput names a Node to delete by its name in Kubernetes:
// the Node of a host that is gone, which the inventory may no longer list
// (kube.delete-node takes an inventory host with on:).
type DeleteLostNodeInput struct {
	Cluster target.Kube `json:"cluster"`
	Name    string      `json:"name" kedge:"required" doc:"the Node's name in Kubernetes, e.g. tyc2.example.com"`
}

func init() {
	spec.Register(spec.Row{Name: CordonAction, Doc: "mark the node unschedulable",
		In: NodeInput{}, Out: NodeResult{}, Timeout: 30 * time.Second,
		Summary: `cordon {{.Host}}`})
}

func init() {
	spec.Register(spec.Row{Name: UncordonAction, Doc: "mark the node schedulable again",
		In: NodeInput{}, Out: NodeResult{}, Timeout: 30 * time.Second,
		Summary: `uncordon {{.Host}}`})
}

func init() {
	spec.Register(spec.Row{Name: DrainAction, Doc: "cordon the node and evict its pods, respecting PodDisruptionBudgets (DaemonSet pods stay)",
		In: DrainInput{}, Out: DrainResult{}, Timeout: 30 * time.Minute,
		Summary: `drain {{.Host}}`})
}

func init() {
	spec.Register(spec.Row{Name: DeleteNodeAction, Doc: "delete the Node object",
		In: NodeInput{}, Out: NodeResult{}, Timeout: 30 * time.Second,
		Summary: `delete node {{.Host}}`})
}

func init() {
	spec.Register(spec.Row{Name: DeleteLostNodeAction, Doc: "delete the Node of a host that is gone, by its name in Kubernetes (it need not be a host of the inventory, as kube.delete-node's on: must be); a Node already gone is success",
		In: DeleteLostNodeInput{}, Out: NodeResult{}, Timeout: 30 * time.Second,
		Summary: `delete node {{.In "name"}}`})
}

func init() {
	spec.Register(spec.Row{Name: GetNodeAction, Doc: "read the Node: whether it exists, is Ready and schedulable, its kubelet version (a missing Node is not an error)",
		In: NodeInput{}, Out: GetNodeResult{}, Timeout: 30 * time.Second,
		Summary: `read node {{.Host}}`})
}

func init() {
	spec.Register(spec.Row{Name: WaitNodeAction, Doc: "wait until the node is Ready (and, optionally, runs the expected kubelet version)",
		In: WaitNodeInput{}, Out: WaitNodeResult{}, Timeout: 30 * time.Minute,
		Summary: `wait for {{.Host}} Ready{{with .In "kubeletVersion"}} with kubelet {{.}}{{end}}`})
}

func init() {
	spec.Register(spec.Row{Name: LabelTaintAction, Doc: "set labels and add taints on the node",
		In: LabelTaintInput{}, Out: NodeResult{}, Timeout: 30 * time.Second,
		Summary: `label and taint {{.Host}}`})
}
