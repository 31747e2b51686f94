package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/resume"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/target"
)

// Activities are the Kubernetes actions. Clients are built once per
// kubeconfig and shared.
type Activities struct {
	// Clients builds a clientset for a cluster; nil uses the kubeconfig.
	Clients func(target.Kube) (kubernetes.Interface, error)
	// PollInterval paces waits (default 1s).
	PollInterval time.Duration
	// RequestTimeout bounds each request to the API (default
	// DefaultRequestTimeout).
	RequestTimeout time.Duration
	// APIOutage is how long node actions wait out an API server that
	// does not answer (default DefaultAPIOutage).
	APIOutage time.Duration
	Logger    *slog.Logger

	mu    sync.Mutex
	cache map[target.Kube]kubernetes.Interface
}

func (a *Activities) client(ctx context.Context, c target.Kube) (kubernetes.Interface, error) {
	if a.Clients != nil {
		return a.Clients(c)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if cs, ok := a.cache[c]; ok {
		return cs, nil
	}
	cfg, err := a.restConfig(ctx, c)
	if err != nil {
		return nil, err
	}
	cs, err := a.newClient(cfg)
	if err != nil {
		return nil, err
	}
	if a.cache == nil {
		a.cache = map[target.Kube]kubernetes.Interface{}
	}
	a.cache[c] = cs
	return cs, nil
}

// DefaultRequestTimeout bounds each request to the API: an API server
// that is restarting, or waiting on an etcd that is, may hold a request
// for a minute, and an action blocked in one sends no heartbeat: at its
// 30 s heartbeat timeout the attempt would be thrown away as a lost
// worker's (seen on every controller of a CA rotation: two waits for
// static pods lost each time). A wait's request cut short is tried again
// at its next poll; another action's fails as a retried API error.
const DefaultRequestTimeout = 10 * time.Second

// newClient is the clientset actions use: requests bounded by
// a.RequestTimeout, and a rate that drains and rollouts do not queue on.
func (a *Activities) newClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = a.RequestTimeout
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRequestTimeout
	}
	return kubernetes.NewForConfig(cfg)
}

func (a *Activities) poll() time.Duration {
	if a.PollInterval > 0 {
		return a.PollInterval
	}
	return time.Second
}

func heartbeat(ctx context.Context, details any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details)
	}
}

// apiError classifies a Kubernetes API error once.
func apiError(node string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("node %s not found", node), errtype.NodeNotFound, err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err):
		return temporal.NewNonRetryableApplicationError(err.Error(), errtype.KubernetesAPI, err)
	case errors.Is(err, context.Canceled):
		return temporal.NewCanceledError(err.Error())
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	return temporal.NewApplicationError(err.Error(), errtype.KubernetesAPI)
}

func parseDuration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%q is not a positive duration", s), errtype.InvalidInput, nil)
	}
	return d, nil
}

// Cordon marks a node unschedulable (kube.cordon).
func (a *Activities) Cordon(ctx context.Context, in kube.NodeInput) (kube.NodeResult, error) {
	return a.setUnschedulable(ctx, in, true)
}

// Uncordon marks a node schedulable again (kube.uncordon).
func (a *Activities) Uncordon(ctx context.Context, in kube.NodeInput) (kube.NodeResult, error) {
	return a.setUnschedulable(ctx, in, false)
}

func (a *Activities) setUnschedulable(ctx context.Context, in kube.NodeInput, on bool) (kube.NodeResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.NodeResult{}, err
	}
	var res kube.NodeResult
	err = a.whileAway(ctx, "set unschedulable", func() error {
		changed, err := markUnschedulable(ctx, cs, in.Node, on)
		res.Changed = res.Changed || changed
		return err
	})
	return res, apiError(in.Node, err)
}

// Drain cordons a node and evicts its pods, respecting
// PodDisruptionBudgets (kube.drain). A budget that keeps refusing until the
// timeout fails the drain with a DrainBlocked error naming the pods and
// budgets.
func (a *Activities) Drain(ctx context.Context, in kube.DrainInput) (kube.DrainResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.DrainResult{}, err
	}
	timeout, err := parseDuration(in.Timeout, 5*time.Minute)
	if err != nil {
		return kube.DrainResult{}, err
	}
	delay, err := parseDuration(in.RetryDelay, 5*time.Second)
	if err != nil {
		return kube.DrainResult{}, err
	}
	// A drain a lost worker began goes on from where it got to: its
	// pods stay in the result and its deadline stands.
	var mu sync.Mutex
	res := kube.DrainResult{Evicted: []string{}}
	prog, resumed := resumeDrain(ctx)
	if resumed {
		res.Evicted = append(res.Evicted, prog.Evicted...)
	}
	budget := remaining(prog.StartedAt, timeout)
	progress := func() drainProgress { // under mu
		return drainProgress{StartedAt: prog.StartedAt, Evicted: slices.Clone(res.Evicted)}
	}
	opts := drainOptions{
		Node: in.Node, Force: in.Force, DeleteEmptyDirData: in.DeleteEmptyDirData,
		Timeout: budget, RetryDelay: delay, Poll: a.poll(),
		Evicted: func(pod *corev1.Pod) {
			mu.Lock()
			if name := pod.Namespace + "/" + pod.Name; !slices.Contains(res.Evicted, name) {
				res.Evicted = append(res.Evicted, name)
			}
			p := progress()
			mu.Unlock()
			heartbeat(ctx, p)
		},
	}
	if in.GracePeriodSeconds > 0 { // else each pod's own
		opts.GracePeriod = new(int64(in.GracePeriodSeconds))
	}
	// An API server that stops answering (restarted, say) is waited
	// out: the drain starts again where the node is.
	evicting := false // the error, if any, is the eviction's
	err = a.whileAwayBeating(ctx, "drain", func() error {
		evicting = false
		if _, err := markUnschedulable(ctx, cs, in.Node, true); err != nil {
			return fmt.Errorf("cordon %s: %w", in.Node, err)
		}
		evicting = true
		err := a.runDrain(ctx, cs, opts, &mu, progress)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return &drainTimedOut{after: timeout, err: err}
		}
		return err
	}, func() any { mu.Lock(); defer mu.Unlock(); return progress() })
	switch {
	case err == nil:
		slices.Sort(res.Evicted)
		return res, nil
	case !evicting:
		return res, apiError(in.Node, err)
	case ctx.Err() != nil:
		return res, temporal.NewCanceledError(ctx.Err().Error())
	}
	return res, a.blocked(context.WithoutCancel(ctx), cs, in.Node, err)
}

// runDrain evicts the node's pods, heartbeating while evictions wait.
func (a *Activities) runDrain(ctx context.Context, cs kubernetes.Interface, opts drainOptions, mu *sync.Mutex, progress func() drainProgress) error {
	stop := make(chan struct{})
	defer close(stop)
	go func() { // heartbeat while waiting on evictions that do not finish
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				p := progress()
				mu.Unlock()
				heartbeat(ctx, p)
			}
		}
	}()
	return drainNode(ctx, cs, opts)
}

// blocked explains a failed drain: which pods are left and which
// PodDisruptionBudgets cover them.
func (a *Activities) blocked(ctx context.Context, cs kubernetes.Interface, node string, cause error) error {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return apiError(node, cause)
	}
	var left, budgets []string
	seen := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || isDaemonSetPod(&p) {
			continue
		}
		left = append(left, p.Namespace+"/"+p.Name)
		pdbs, err := cs.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, pdb := range pdbs.Items {
			if covers(&pdb, &p) && !seen[p.Namespace+"/"+pdb.Name] {
				seen[p.Namespace+"/"+pdb.Name] = true
				budgets = append(budgets, fmt.Sprintf("%s/%s (%d disruptions allowed)", p.Namespace, pdb.Name, pdb.Status.DisruptionsAllowed))
			}
		}
	}
	if len(budgets) == 0 {
		return temporal.NewApplicationError(fmt.Sprintf("drain %s: %v (pods left: %s)", node, cause, strings.Join(left, ", ")), errtype.KubernetesAPI)
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("drain %s blocked by PodDisruptionBudget %s: pods left %s (%v)", node, strings.Join(budgets, ", "), strings.Join(left, ", "), cause),
		errtype.DrainBlocked, nil, map[string]any{"pods": left, "budgets": budgets})
}

func isDaemonSetPod(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

func covers(pdb *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() {
		return false
	}
	return sel.Matches(labels.Set(p.Labels))
}

// DeleteNode deletes the Node object (kube.delete-node); a node already
// gone is not an error.
func (a *Activities) DeleteNode(ctx context.Context, in kube.NodeInput) (kube.NodeResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.NodeResult{}, err
	}
	err = a.whileAway(ctx, "delete node", func() error {
		return cs.CoreV1().Nodes().Delete(ctx, in.Node, metav1.DeleteOptions{})
	})
	if apierrors.IsNotFound(err) {
		return kube.NodeResult{}, nil
	}
	if err != nil {
		return kube.NodeResult{}, apiError(in.Node, err)
	}
	return kube.NodeResult{Changed: true}, nil
}

// DeleteLostNode deletes a Node by its name (kube.delete-lost-node): the
// Node of a host that is gone, which need not be a host of the inventory.
// A Node already gone is success.
func (a *Activities) DeleteLostNode(ctx context.Context, in kube.DeleteLostNodeInput) (kube.NodeResult, error) {
	if strings.TrimSpace(in.Name) == "" {
		return kube.NodeResult{}, temporal.NewNonRetryableApplicationError("name is required", errtype.InvalidInput, nil)
	}
	if errs := validation.IsDNS1123Subdomain(in.Name); len(errs) > 0 {
		return kube.NodeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("name %q is not a Node's name: %s", in.Name, strings.Join(errs, "; ")), errtype.InvalidInput, nil)
	}
	return a.DeleteNode(ctx, kube.NodeInput{Cluster: in.Cluster, Node: in.Name})
}

// GetNode reports whether the Node exists and its state (kube.get-node):
// a missing Node is an answer, not an error.
func (a *Activities) GetNode(ctx context.Context, in kube.NodeInput) (kube.GetNodeResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.GetNodeResult{}, err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, in.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return kube.GetNodeResult{}, nil
	}
	if err != nil {
		return kube.GetNodeResult{}, apiError(in.Node, err)
	}
	res := kube.GetNodeResult{Exists: true, Ready: nodeReady(n), Unschedulable: n.Spec.Unschedulable, KubeletVersion: n.Status.NodeInfo.KubeletVersion}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			res.InternalIP = a.Address
		}
	}
	return res, nil
}

// WaitNode waits until the node is Ready and, when asked, reports the
// expected kubelet version (kube.wait-node).
func (a *Activities) WaitNode(ctx context.Context, in kube.WaitNodeInput) (kube.WaitNodeResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.WaitNodeResult{}, err
	}
	timeout, err := parseDuration(in.Timeout, 5*time.Minute)
	if err != nil {
		return kube.WaitNodeResult{}, err
	}
	var after, leaseAfter time.Time
	if in.ReadyAfter != "" {
		if after, err = time.Parse(time.RFC3339, in.ReadyAfter); err != nil {
			return kube.WaitNodeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("readyAfter %q is not an RFC 3339 time", in.ReadyAfter), errtype.InvalidInput, nil)
		}
	}
	if in.LeaseAfter != "" {
		if leaseAfter, err = time.Parse(time.RFC3339, in.LeaseAfter); err != nil {
			return kube.WaitNodeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("leaseAfter %q is not an RFC 3339 time", in.LeaseAfter), errtype.InvalidInput, nil)
		}
	}
	// A wait a lost worker began keeps its deadline.
	prog := waitProgress{StartedAt: resume.StartedAt(ctx)}
	deadline := prog.StartedAt.Add(timeout)
	var last kube.WaitNodeResult
	lastErr := "not seen yet"
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, in.Node, metav1.GetOptions{})
		switch {
		case err == nil:
			last = kube.WaitNodeResult{Ready: nodeReady(node), KubeletVersion: node.Status.NodeInfo.KubeletVersion}
			// Heartbeats have whole seconds: one in the restart's own
			// second is the new kubelet's (it posts at start), as the
			// restart's time is taken before the old one stops.
			fresh := after.IsZero() || !readyHeartbeat(node).Before(after)
			renewed, lease := true, ""
			if !leaseAfter.IsZero() {
				renewed, lease = leaseRenewed(ctx, cs, in.Node, leaseAfter)
			}
			booted := in.BootID == "" || node.Status.NodeInfo.BootID == in.BootID
			if last.Ready && fresh && renewed && booted && (in.KubeletVersion == "" || last.KubeletVersion == in.KubeletVersion) {
				return last, nil
			}
			lastErr = fmt.Sprintf("ready=%t kubelet %s", last.Ready, last.KubeletVersion)
			if !fresh {
				lastErr += fmt.Sprintf(", last heartbeat %s is before %s", readyHeartbeat(node).UTC().Format(time.RFC3339), in.ReadyAfter)
			}
			if !booted {
				lastErr += fmt.Sprintf(", status of boot %q, not %s", node.Status.NodeInfo.BootID, in.BootID)
			}
			if !renewed {
				lastErr += ", " + lease
			}
		case apierrors.IsNotFound(err):
			lastErr = "not registered"
		default:
			lastErr = err.Error()
		}
		prog.Last = last
		heartbeat(ctx, prog)
		if time.Now().After(deadline) {
			want := "Ready"
			if in.KubeletVersion != "" {
				want += " with kubelet " + in.KubeletVersion
			}
			return last, temporal.NewApplicationError(fmt.Sprintf("node %s not %s after %s, waiting since %s (%s)",
				in.Node, want, timeout, prog.StartedAt.UTC().Format(time.RFC3339), lastErr), errtype.NodeNotReady)
		}
		select {
		case <-ctx.Done():
			return last, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

// leaseRenewed says whether the node's Lease was renewed at or after
// after, else why not.
func leaseRenewed(ctx context.Context, cs kubernetes.Interface, node string, after time.Time) (bool, string) {
	l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	switch {
	case err != nil:
		return false, "its Lease: " + err.Error()
	case l.Spec.RenewTime == nil:
		return false, "its Lease was never renewed"
	case l.Spec.RenewTime.Before(&metav1.MicroTime{Time: after}):
		return false, fmt.Sprintf("its Lease was last renewed %s, before %s", l.Spec.RenewTime.UTC().Format(time.RFC3339), after.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// readyHeartbeat is when the node's Ready condition was last posted.
func readyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// LabelTaint sets labels and adds taints (kube.label-taint); it changes
// nothing when they are already there.
func (a *Activities) LabelTaint(ctx context.Context, in kube.LabelTaintInput) (kube.NodeResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.NodeResult{}, err
	}
	wantLabels := map[string]string{}
	for _, l := range in.Labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return kube.NodeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("label %q must be key=value", l), errtype.InvalidInput, nil)
		}
		wantLabels[k] = v
	}
	var wantTaints []corev1.Taint
	for _, s := range in.Taints {
		kv, effect, ok := strings.Cut(s, ":")
		if !ok {
			return kube.NodeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("taint %q must be key=value:Effect", s), errtype.InvalidInput, nil)
		}
		k, v, _ := strings.Cut(kv, "=")
		wantTaints = append(wantTaints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	changed := false
	err = a.whileAway(ctx, "label and taint", func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := cs.CoreV1().Nodes().Get(ctx, in.Node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed = false
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			for k, v := range wantLabels {
				if have, ok := node.Labels[k]; !ok || have != v { // an empty value is a value
					node.Labels[k], changed = v, true
				}
			}
			for _, t := range wantTaints {
				if !slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) && x.Value == t.Value }) {
					node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
					node.Spec.Taints = append(node.Spec.Taints, t)
					changed = true
				}
			}
			if !changed {
				return nil
			}
			_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		})
	})
	if err != nil {
		return kube.NodeResult{}, apiError(in.Node, err)
	}
	return kube.NodeResult{Changed: changed}, nil
}
