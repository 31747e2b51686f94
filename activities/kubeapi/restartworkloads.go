package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/kube"

	"kedge.dev/kedge/actions/errtype"
)

// restartMark is the pod template annotation a restart sets.
const restartMark = "kedge.dev/restart"

// RestartWorkloads restarts every DaemonSet and Deployment of the
// namespaces (kube.restart-workloads) by marking its pod template, as
// `kubectl rollout restart` does, and waits until each has rolled out:
// its new pods run and are available. A CA rotation needs it for what
// reads its in-cluster CA once at start (kube-proxy): its new pods mount
// the kube-root-ca.crt of now. A workload already marked so is left.
func (a *Activities) RestartWorkloads(ctx context.Context, in kube.RestartWorkloadsInput) (kube.RestartWorkloadsResult, error) {
	res := kube.RestartWorkloadsResult{Restarted: []string{}}
	if len(in.Namespaces) == 0 || strings.TrimSpace(in.Mark) == "" || len(in.Mark) > 256 {
		return res, updateRefused("namespaces and a mark (at most 256 characters) are required")
	}
	for _, ns := range in.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return res, updateRefused(fmt.Sprintf("namespace %q: %s", ns, strings.Join(errs, "; ")))
		}
	}
	timeout, err := parseDuration(in.Timeout, 10*time.Minute)
	if err != nil {
		return res, err
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return res, err
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{restartMark: in.Mark}}}}})
	if err != nil {
		return res, err
	}
	for _, ns := range in.Namespaces {
		restarted, err := restartNamespace(ctx, cs, ns, in.Mark, patch)
		res.Restarted = append(res.Restarted, restarted...)
		if err != nil {
			return res, err
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		pending, err := notRolledOut(ctx, cs, in.Namespaces)
		if err == nil && len(pending) == 0 {
			return res, nil
		}
		last := fmt.Sprint(err)
		if err == nil {
			last = strings.Join(pending, ", ")
		}
		heartbeat(ctx, map[string]any{"restarted": len(res.Restarted), "waiting": last})
		if time.Now().After(deadline) {
			return res, temporal.NewApplicationError(fmt.Sprintf("not rolled out after %s: %s", timeout, last), errtype.NotInEffect)
		}
		select {
		case <-ctx.Done():
			return res, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

// restartNamespace marks every DaemonSet and Deployment of ns not marked
// already.
func restartNamespace(ctx context.Context, cs kubernetes.Interface, ns, mark string, patch []byte) ([]string, error) {
	var out []string
	dss, err := cs.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, clusterError("list the DaemonSets of "+ns, err)
	}
	for _, d := range dss.Items {
		if d.Spec.Template.Annotations[restartMark] == mark {
			continue
		}
		if _, err := cs.AppsV1().DaemonSets(ns).Patch(ctx, d.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return out, clusterError("restart DaemonSet "+ns+"/"+d.Name, err)
		}
		out = append(out, ns+"/daemonset/"+d.Name)
	}
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, clusterError("list the Deployments of "+ns, err)
	}
	for _, d := range deps.Items {
		if d.Spec.Template.Annotations[restartMark] == mark {
			continue
		}
		if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return out, clusterError("restart Deployment "+ns+"/"+d.Name, err)
		}
		out = append(out, ns+"/deployment/"+d.Name)
	}
	return out, nil
}

// notRolledOut lists the DaemonSets and Deployments of the namespaces
// whose newest pods are not all up and available yet.
func notRolledOut(ctx context.Context, cs kubernetes.Interface, namespaces []string) ([]string, error) {
	var pending []string
	for _, ns := range namespaces {
		dss, err := cs.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, d := range dss.Items {
			if !daemonSetRolledOut(&d) {
				pending = append(pending, fmt.Sprintf("%s/daemonset/%s (%d of %d updated and available)", ns, d.Name, min(d.Status.UpdatedNumberScheduled, d.Status.NumberAvailable), d.Status.DesiredNumberScheduled))
			}
		}
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, d := range deps.Items {
			if !deploymentRolledOut(&d) {
				pending = append(pending, fmt.Sprintf("%s/deployment/%s (%d of %d updated and available)", ns, d.Name, min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas), d.Status.Replicas))
			}
		}
	}
	slices.Sort(pending)
	return pending, nil
}

func daemonSetRolledOut(d *appsv1.DaemonSet) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
		s.NumberAvailable == s.DesiredNumberScheduled && s.NumberUnavailable == 0
}

func deploymentRolledOut(d *appsv1.Deployment) bool {
	s, want := d.Status, int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}
