package main

import (
	"context"
	"log"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	// bootID and kernel are what the kernel says (in a test host's
	// containers, the host's boot ID and booted kernel release), as the
	// real kubelet reports them in the Node's nodeInfo.
	bootID, kernel string
	cniDir         string // where the runtime's network config is looked for
	network        string // the network config last found, "" for none

	networkChecked bool
	// The heartbeat's clocks: when the Node was last looked at (with the
	// network it then had), its status last posted, its Lease renewed.
	checkedAt, reportedAt, renewedAt time.Time
	postedNetwork                    string
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

// The real kubelet's cadence (its defaults): it looks at its Node every
// nodeStatusUpdateFrequency and posts its status only when it changed or
// nodeStatusReportFrequency passed since the last post; it renews its
// Lease, the heartbeat the node lifecycle controller reads, every
// quarter of the Lease's 40 s. A simulator posting every tick wrote ten
// times as much to the API server and etcd as a real node does.
const (
	statusUpdateEvery = 10 * time.Second
	statusReportEvery = 5 * time.Minute
	leaseRenewEvery   = 10 * time.Second
	leaseSeconds      = 40
)

// heartbeat keeps the node's status and Lease as the real kubelet does:
// at start, at once when its own state changed (a network config
// appeared or went), and on the cadence above.
func (n *node) heartbeat(ctx context.Context, cs kubernetes.Interface, now time.Time) error {
	if n.checkedAt.IsZero() || n.network != n.postedNetwork || now.Sub(n.checkedAt) >= statusUpdateEvery {
		if err := postStatus(ctx, cs, n, now); err != nil {
			return err
		}
		n.checkedAt, n.postedNetwork = now, n.network
	}
	if n.renewedAt.IsZero() || now.Sub(n.renewedAt) >= leaseRenewEvery {
		if err := renewLease(ctx, cs, n, now); err != nil {
			return err
		}
		n.renewedAt = now
	}
	return nil
}

// postStatus posts the node's status when it differs from the Node's (a
// condition's status, reason or message, the version, the addresses, the
// capacity, the port), or when statusReportEvery passed since the last
// post.
func postStatus(ctx context.Context, cs kubernetes.Interface, n *node, at time.Time) error {
	now := metav1.NewTime(at)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.uid = cur.UID
		want := cur.DeepCopy()
		want.Status.Conditions = conditions(cur.Status.Conditions, now, n.network != "")
		want.Status.NodeInfo.KubeletVersion = n.version
		want.Status.NodeInfo.BootID, want.Status.NodeInfo.KernelVersion = n.bootID, n.kernel
		want.Status.NodeInfo.OperatingSystem = runtime.GOOS
		want.Status.NodeInfo.Architecture = runtime.GOARCH
		want.Status.Capacity = corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("16Gi"), "pods": resource.MustParse("110")}
		want.Status.Allocatable = want.Status.Capacity
		want.Status.DaemonEndpoints.KubeletEndpoint.Port = n.port
		var addrs []corev1.NodeAddress
		for _, ip := range n.ips {
			addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		want.Status.Addresses = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.name})
		if !statusChanged(cur.Status, want.Status) && !n.reportedAt.IsZero() && at.Sub(n.reportedAt) < statusReportEvery {
			return nil
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, want, metav1.UpdateOptions{}); err != nil {
			return err
		}
		n.reportedAt = at
		return nil
	})
}

// statusChanged says whether a node status differs from another in more
// than its conditions' times.
func statusChanged(a, b corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime, s.Conditions[i].LastTransitionTime = metav1.Time{}, metav1.Time{}
		}
		return s
	}
	return !equality.Semantic.DeepEqual(strip(a), strip(b))
}

// renewLease renews the node's Lease, made when missing (owned by the
// Node, as the real kubelet makes it).
func renewLease(ctx context.Context, cs kubernetes.Interface, n *node, at time.Time) error {
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.name), LeaseDurationSeconds: ptr.To(int32(leaseSeconds)),
				RenewTime: &metav1.MicroTime{Time: at}},
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
	lease.Spec.RenewTime = &metav1.MicroTime{Time: at}
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
