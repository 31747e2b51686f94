package main

import (
	"context"
	"log"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// node is what the simulator knows of its Node.
type node struct {
	name    string
	uid     types.UID // set once registered
	ips     []string  // --node-ip
	port    int32     // the kubelet's HTTPS port
	version string
	cniDir  string // where the runtime's network config is looked for
	network string // the network config last found, "" for none

	networkChecked bool
}

// hostIP is the address pods on the node report as their host's.
func (n *node) hostIP() string {
	if len(n.ips) > 0 {
		return n.ips[0]
	}
	return "127.0.0.1"
}

// initialNode is the Node the kubelet registers: the well-known labels,
// --node-labels, and --register-with-taints, set at creation only.
func initialNode(o options) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:      o.nodeName,
		corev1.LabelOSStable:      runtime.GOOS,
		corev1.LabelArchStable:    runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
	for k, v := range o.nodeLabels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: o.nodeName, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: append([]corev1.Taint(nil), o.taints...)},
	}
}

// register creates the Node, or finds it registered already, retrying
// until the API server takes it or ctx ends.
func register(ctx context.Context, cs kubernetes.Interface, o options, n *node, logger *log.Logger) bool {
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		created, err := cs.CoreV1().Nodes().Create(ctx, initialNode(o), metav1.CreateOptions{})
		if err == nil {
			n.uid = created.UID
			logger.Printf("registered node %s", n.name)
			return true
		}
		if apierrors.IsAlreadyExists(err) {
			existing, gerr := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if gerr == nil {
				n.uid = existing.UID
				logger.Printf("node %s is registered already", n.name)
				return true
			}
			err = gerr
		}
		logger.Printf("register node %s: %v; retrying in %s", n.name, err, delay)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
	}
}

// postStatus posts the Node's status (Ready, addresses, the endpoint, the
// version) and renews its Lease.
func postStatus(ctx context.Context, cs kubernetes.Interface, n *node) error {
	now := metav1.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.uid = cur.UID
		cur.Status.Conditions = conditions(cur.Status.Conditions, now, n.network != "")
		cur.Status.NodeInfo.KubeletVersion = n.version
		cur.Status.NodeInfo.OperatingSystem = runtime.GOOS
		cur.Status.NodeInfo.Architecture = runtime.GOARCH
		cur.Status.Capacity = corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("16Gi"), "pods": resource.MustParse("110")}
		cur.Status.Allocatable = cur.Status.Capacity
		cur.Status.DaemonEndpoints.KubeletEndpoint.Port = n.port
		var addrs []corev1.NodeAddress
		for _, ip := range n.ips {
			addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		cur.Status.Addresses = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.name})
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.name), LeaseDurationSeconds: ptr.To(int32(40)),
				RenewTime: &metav1.MicroTime{Time: now.Time}},
		}
		if n.uid != "" {
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.name, UID: n.uid}}
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Time}
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// conditions are the node's conditions as of now: Ready when the runtime
// has a network, NotReady as the real kubelet says it otherwise; no
// pressure. A condition keeps its transition time while its status stays;
// others (set by someone else) are kept as they are.
func conditions(old []corev1.NodeCondition, now metav1.Time, networkReady bool) []corev1.NodeCondition {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet simulator is posting ready status"}
	if !networkReady {
		ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, notReadyReason, notReadyMessage
	}
	mine := []corev1.NodeCondition{
		ready,
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
	}
	byType := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range old {
		byType[c.Type] = c
	}
	for i := range mine {
		mine[i].LastHeartbeatTime, mine[i].LastTransitionTime = now, now
		if prev, ok := byType[mine[i].Type]; ok && prev.Status == mine[i].Status {
			mine[i].LastTransitionTime = prev.LastTransitionTime
		}
		delete(byType, mine[i].Type)
	}
	for _, c := range old {
		if _, other := byType[c.Type]; other {
			mine = append(mine, c)
		}
	}
	return mine
}
