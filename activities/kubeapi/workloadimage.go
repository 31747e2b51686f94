package kubeapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/imageref"
)

// upgradeManager owns the image fields an upgrade applies: a field
// manager of its own, so that applying one field never takes away the
// fields Kedge's own install applied (as field manager kedge).
const upgradeManager = "kedge-upgrade"

// SetWorkloadImage sets the image of a DaemonSet's or Deployment's
// container (kube.set-workload-image), applied server-side as field
// manager kedge-upgrade, and waits until the rollout is done: every pod
// updated and available. A cluster without the workload is no error
// (Present false): an addon it does not run. Run again, it changes
// nothing; its undo is the same action with the previous image.
func (a *Activities) SetWorkloadImage(ctx context.Context, in kube.SetWorkloadImageInput) (kube.SetWorkloadImageResult, error) {
	bad := func(msg string) error {
		return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
	}
	if in.Kind != "DaemonSet" && in.Kind != "Deployment" {
		return kube.SetWorkloadImageResult{}, bad(fmt.Sprintf("kind %q must be DaemonSet or Deployment", in.Kind))
	}
	timeout, err := parseDuration(in.Timeout, 5*time.Minute)
	if err != nil {
		return kube.SetWorkloadImageResult{}, err
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.SetWorkloadImageResult{}, err
	}
	ns := cmp.Or(in.Namespace, "kube-system")
	what := fmt.Sprintf("%s %s/%s", in.Kind, ns, in.Name)
	w := workload{cs: cs, kind: in.Kind, ns: ns, name: in.Name}
	spec, err := w.podSpec(ctx)
	if apierrors.IsNotFound(err) {
		return kube.SetWorkloadImageResult{}, nil
	}
	if err != nil {
		return kube.SetWorkloadImageResult{}, apiError("", err)
	}
	// Checked once the workload is found: an undo's previous image is
	// empty where the step found none.
	if (in.Tag == "") == (in.Image == "") {
		return kube.SetWorkloadImageResult{}, bad("give one of tag and image")
	}
	res := kube.SetWorkloadImageResult{Present: true}
	for _, c := range spec.Containers {
		if c.Name == in.Container {
			res.Previous = c.Image
		}
	}
	if res.Previous == "" {
		return res, bad(fmt.Sprintf("%s has no container %q", what, in.Container))
	}
	res.Image = in.Image
	if in.Tag != "" {
		res.Image = nodefiles.Retag(res.Previous, in.Tag)
	}
	if err := imageref.Check(res.Image); err != nil {
		return res, bad(err.Error())
	}
	if res.Image != res.Previous {
		if err := w.applyImage(ctx, in.Container, res.Image); err != nil {
			return res, apiError("", err)
		}
		res.Changed = true
	}
	deadline := time.Now().Add(timeout)
	for {
		done, state, err := w.rolledOut(ctx)
		if err != nil {
			return res, apiError("", err)
		}
		if done {
			return res, nil
		}
		heartbeat(ctx, state)
		if time.Now().After(deadline) {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s not rolled out to %s within %s: %s", what, res.Image, timeout, state), errtype.CheckFailed, nil)
		}
		select {
		case <-ctx.Done():
			return res, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

// workload is a DaemonSet or a Deployment.
type workload struct {
	cs             kubernetes.Interface
	kind, ns, name string
}

func (w workload) podSpec(ctx context.Context) (corev1.PodSpec, error) {
	if w.kind == "DaemonSet" {
		ds, err := w.cs.AppsV1().DaemonSets(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return corev1.PodSpec{}, err
		}
		return ds.Spec.Template.Spec, nil
	}
	d, err := w.cs.AppsV1().Deployments(w.ns).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		return corev1.PodSpec{}, err
	}
	return d.Spec.Template.Spec, nil
}

// applyImage applies the container's image alone.
func (w workload) applyImage(ctx context.Context, container, image string) error {
	obj := map[string]any{
		"apiVersion": "apps/v1", "kind": w.kind,
		"metadata": map[string]any{"name": w.name, "namespace": w.ns},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": container, "image": image}},
		}}},
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: upgradeManager, Force: ptr.To(true)}
	if w.kind == "DaemonSet" {
		_, err = w.cs.AppsV1().DaemonSets(w.ns).Patch(ctx, w.name, types.ApplyPatchType, data, opts)
	} else {
		_, err = w.cs.AppsV1().Deployments(w.ns).Patch(ctx, w.name, types.ApplyPatchType, data, opts)
	}
	return err
}

// rolledOut: the controller saw the change and every pod is updated and
// available; state says how far it is.
func (w workload) rolledOut(ctx context.Context) (bool, string, error) {
	if w.kind == "DaemonSet" {
		ds, err := w.cs.AppsV1().DaemonSets(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return daemonSetDone(ds), fmt.Sprintf("%d of %d pods updated, %d available", ds.Status.UpdatedNumberScheduled, ds.Status.DesiredNumberScheduled, ds.Status.NumberAvailable), nil
	}
	d, err := w.cs.AppsV1().Deployments(w.ns).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	done := d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
	return done, fmt.Sprintf("%d of %d replicas updated, %d available", d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas), nil
}

func daemonSetDone(ds *appsv1.DaemonSet) bool {
	s := ds.Status
	return s.ObservedGeneration >= ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
		s.NumberAvailable == s.DesiredNumberScheduled && s.NumberUnavailable == 0
}
