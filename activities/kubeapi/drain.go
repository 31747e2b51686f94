package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Kedge's own drain: cordon the node, evict its pods through the
// policy/v1 Eviction API (so PodDisruptionBudgets are asked), and wait
// until each evicted pod is gone. What it evicts:
//
//   - mirror pods (a kubelet's static pods) are left: the kubelet puts
//     them back from its manifests;
//   - pods of a DaemonSet that exists are left: the DaemonSet would put
//     them back on the node at once, cordoned or not;
//   - pods that no controller manages, pods of a DaemonSet that is gone,
//     and running pods with emptyDir volumes are refused, the whole drain
//     with them, before anything is evicted, unless the input allows them
//     (Force, DeleteEmptyDirData);
//   - pods that have finished (Succeeded or Failed) are evicted whatever
//     they are: nothing of theirs runs to be lost;
//   - every other pod is evicted, those already being deleted too (the
//     drain waits for them to go).
//
// An eviction a budget refuses (429) is asked again every RetryDelay until
// the drain's deadline; one answered 404 is a pod already gone. A pod is
// gone when the API no longer has it, or has another pod (a new UID) by
// its name. Pods are evicted side by side.

// drainOptions says how one drain goes.
type drainOptions struct {
	Node string
	// Force evicts pods no controller manages (nothing recreates them)
	// and pods of a DaemonSet that no longer exists.
	Force bool
	// DeleteEmptyDirData evicts running pods that have emptyDir volumes
	// (their data is lost).
	DeleteEmptyDirData bool
	// GracePeriod, when not nil, replaces each pod's own termination
	// grace period, in seconds.
	GracePeriod *int64
	// Timeout is the whole drain's: budgets refusing and pods slow to
	// terminate are waited for until then.
	Timeout time.Duration
	// RetryDelay is the wait before asking again for an eviction a
	// budget refused.
	RetryDelay time.Duration
	// Poll is the wait between looks at an evicted pod that is not gone
	// yet.
	Poll time.Duration
	// Evicted, when not nil, is told of each pod the drain evicted once
	// it is gone. It is called from several goroutines at once.
	Evicted func(*corev1.Pod)
}

// markUnschedulable sets the node's spec.unschedulable to on (a patch),
// unless it already is so; it says whether it changed the node.
func markUnschedulable(ctx context.Context, cs kubernetes.Interface, node string, on bool) (bool, error) {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil || n.Spec.Unschedulable == on {
		return false, err
	}
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return false, err
	}
	return true, nil
}

// drainNode evicts the pods of opts.Node (already cordoned) and waits
// until they are gone. An error that wraps context.DeadlineExceeded is
// the drain's own deadline passing (opts.Timeout), and nothing else: a
// request that timed out on its own comes back as an unanswered error.
func drainNode(ctx context.Context, cs kubernetes.Interface, opts drainOptions) error {
	dctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	d := &drainer{ctx: ctx, dctx: dctx, cs: cs, opts: opts}
	pods, err := d.toEvict()
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs podErrors
		wg   sync.WaitGroup
	)
	for _, p := range pods {
		wg.Go(func() {
			if err := d.evict(p); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) == 0 {
		return nil
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// drainer is one drain under way: ctx is the caller's, dctx ends at the
// drain's deadline.
type drainer struct {
	ctx, dctx context.Context
	cs        kubernetes.Interface
	opts      drainOptions
}

// Why pods are refused, in the words of the drain's input.
const (
	refuseUnmanaged = "pods no controller manages (force evicts them)"
	refuseEmptyDir  = "running pods with emptyDir volumes (deleteEmptyDirData evicts them; their data is lost)"
	refuseOrphanDS  = "pods of a DaemonSet that is gone (force evicts them)"
)

// toEvict lists the node's pods and picks those to evict; it refuses the
// drain when a pod may not be evicted and may not be left either.
func (d *drainer) toEvict() ([]corev1.Pod, error) {
	list, err := d.cs.CoreV1().Pods(metav1.NamespaceAll).List(d.dctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", d.opts.Node).String(),
	})
	if err != nil {
		return nil, d.failed("list the pods of "+d.opts.Node, err)
	}
	var evict []corev1.Pod
	refused := map[string][]string{}
	for _, p := range list.Items {
		if p.Spec.NodeName != d.opts.Node { // a server that ignored the selector
			continue
		}
		ok, why, err := d.verdict(&p)
		switch {
		case err != nil:
			return nil, err
		case why != "":
			refused[why] = append(refused[why], p.Namespace+"/"+p.Name)
		case ok:
			evict = append(evict, p)
		}
	}
	if len(refused) > 0 {
		var parts []string
		for _, why := range slices.Sorted(maps.Keys(refused)) {
			parts = append(parts, why+": "+strings.Join(refused[why], ", "))
		}
		return nil, fmt.Errorf("cannot evict %s", strings.Join(parts, "; "))
	}
	return evict, nil
}

// verdict says whether p is evicted (true), left (false), or refused
// (why, the reason).
func (d *drainer) verdict(p *corev1.Pod) (evict bool, why string, err error) {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false, "", nil
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true, "", nil
	}
	owner := metav1.GetControllerOf(p)
	if owner != nil && owner.Kind == "DaemonSet" && owner.APIVersion == "apps/v1" {
		_, err := d.cs.AppsV1().DaemonSets(p.Namespace).Get(d.dctx, owner.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			return false, "", nil
		case !apierrors.IsNotFound(err):
			return false, "", d.failed("get the DaemonSet of "+p.Namespace+"/"+p.Name, err)
		case !d.opts.Force:
			return false, refuseOrphanDS, nil
		}
		return true, "", nil
	}
	if !d.opts.DeleteEmptyDirData && slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.EmptyDir != nil }) {
		return false, refuseEmptyDir, nil
	}
	if owner == nil && !d.opts.Force {
		return false, refuseUnmanaged, nil
	}
	return true, "", nil
}

// evict evicts one pod, asking again while a budget refuses, then waits
// until it is gone.
func (d *drainer) evict(p corev1.Pod) error {
	name := p.Namespace + "/" + p.Name
	var refusal error // the last answer that was not yes
	for {
		if d.dctx.Err() != nil {
			state := "not evicted yet"
			if refusal != nil {
				state = "its eviction still refused"
			}
			return d.expired(name, state, refusal)
		}
		err := d.cs.PolicyV1().Evictions(p.Namespace).Evict(d.dctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: d.opts.GracePeriod},
		})
		terminating := apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
		switch {
		case err == nil, terminating && p.DeletionTimestamp != nil:
			// Evicted, or in a namespace being deleted that already
			// deletes it: it only has to go.
			return d.waitGone(p)
		case apierrors.IsNotFound(err):
			return nil // gone before its eviction
		case apierrors.IsTooManyRequests(err), terminating:
			// A budget refuses for now (or the namespace is being
			// deleted and will delete the pod): ask again.
			refusal = err
			if d.opts.RetryDelay > 0 {
				t := time.NewTimer(d.opts.RetryDelay)
				select {
				case <-d.dctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
		default:
			return d.failed("evict "+name, err)
		}
		// The pod as it is now: being deleted, or replaced by another
		// of its name. Not found, the eviction says so next.
		if fresh, err := d.cs.CoreV1().Pods(p.Namespace).Get(d.dctx, p.Name, metav1.GetOptions{}); err == nil {
			p = *fresh
		}
	}
}

// waitGone waits until the evicted pod p is gone, then tells the caller.
func (d *drainer) waitGone(p corev1.Pod) error {
	name := p.Namespace + "/" + p.Name
	for {
		now, err := d.cs.CoreV1().Pods(p.Namespace).Get(d.dctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && now.UID != p.UID):
			if d.opts.Evicted != nil {
				d.opts.Evicted(&p)
			}
			return nil
		case err != nil:
			return d.failed("wait for "+name+" to go", err)
		}
		select {
		case <-d.dctx.Done():
			return d.expired(name, "evicted, still there", nil)
		case <-time.After(d.opts.Poll):
		}
	}
}

// failed is the error of a request that failed: the drain's deadline
// when that is what ended it, else the request's own error.
func (d *drainer) failed(what string, err error) error {
	if d.dctx.Err() != nil {
		return d.expired(what, "", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The client gave up on this one request (its own timeout): an
		// API server that does not answer, not the drain's deadline.
		err = &unanswered{err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// expired is the error of a pod (or step) the drain's end caught: its
// deadline, or the caller's context ending.
func (d *drainer) expired(what, state string, last error) error {
	if d.ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, d.ctx.Err())
	}
	return &podTimedOut{what: what, state: state, last: last}
}

// podTimedOut is a pod still there at the drain's deadline: it is
// context.DeadlineExceeded to errors.Is.
type podTimedOut struct {
	what, state string
	last        error // the last refusal, if any
}

func (e *podTimedOut) Error() string {
	s := e.what
	if e.state != "" {
		s += ": " + e.state
	}
	s += " at the deadline"
	if e.last != nil {
		s += fmt.Sprintf(" (%v)", e.last)
	}
	return s
}

func (e *podTimedOut) Unwrap() error { return context.DeadlineExceeded }

// unanswered is a request the client stopped waiting for: to away() a
// timeout like any other, but not context.DeadlineExceeded to errors.Is,
// which would read as the drain's own deadline.
type unanswered struct{ err error }

func (e *unanswered) Error() string   { return e.err.Error() }
func (e *unanswered) Timeout() bool   { return true }
func (e *unanswered) Temporary() bool { return true }

// podErrors are the failures of a drain's pods, each its own; errors.Is
// and errors.As look at every one.
type podErrors []error

func (e podErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e podErrors) Unwrap() []error { return e }
