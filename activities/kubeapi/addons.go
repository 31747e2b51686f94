package kubeapi

import (
	"context"
	"encoding/json"

	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/errtype"
)

// fieldManager owns the fields Kedge applies (server-side apply).
const fieldManager = "kedge"

// InstallKubeProxy renders kube-proxy (render.KubeProxy) and applies it
// server-side as field manager kedge, forcing its own fields: run again
// with the same input it changes nothing; with a new image it rolls the
// DaemonSet one node at a time.
func (a *Activities) InstallKubeProxy(ctx context.Context, in kube.InstallKubeProxyInput) (kube.ChangedResult, error) {
	objs, err := nodefiles.KubeProxy(nodefiles.KubeProxyInput{Image: in.Image, Server: in.Server, PodCIDR: in.PodCIDR})
	if err != nil {
		return kube.ChangedResult{}, temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, nil)
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.ChangedResult{}, err
	}
	type step struct {
		kind  string
		apply func() (bool, error)
	}
	ns := nodefiles.KubeProxyNamespace
	sa, crb := cs.CoreV1().ServiceAccounts(ns), cs.RbacV1().ClusterRoleBindings()
	cm, ds := cs.CoreV1().ConfigMaps(ns), cs.AppsV1().DaemonSets(ns)
	var res kube.ChangedResult
	for _, s := range []step{
		{"ServiceAccount", func() (bool, error) {
			return apply(ctx, sa.Get, sa.Patch, objs.ServiceAccount.Name, objs.ServiceAccount)
		}},
		{"ClusterRoleBinding", func() (bool, error) { return apply(ctx, crb.Get, crb.Patch, objs.Binding.Name, objs.Binding) }},
		{"ConfigMap", func() (bool, error) { return apply(ctx, cm.Get, cm.Patch, objs.Kubeconfig.Name, objs.Kubeconfig) }},
		{"DaemonSet", func() (bool, error) { return apply(ctx, ds.Get, ds.Patch, objs.DaemonSet.Name, objs.DaemonSet) }},
	} {
		changed, err := s.apply()
		if err != nil {
			return res, clusterError("apply kube-proxy's "+s.kind, err)
		}
		res.Changed = res.Changed || changed
		heartbeat(ctx, s.kind)
	}
	return res, nil
}

// apply applies obj server-side with a typed client's Get and Patch, and
// says whether the object changed (its resourceVersion did).
func apply[T interface{ GetResourceVersion() string }](ctx context.Context,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	patch func(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (T, error),
	name string, obj any,
) (bool, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return false, err
	}
	before := ""
	if have, err := get(ctx, name, metav1.GetOptions{}); err == nil {
		before = have.GetResourceVersion()
	}
	after, err := patch(ctx, name, types.ApplyPatchType, data, applyOptions())
	if err != nil {
		return false, err
	}
	return after.GetResourceVersion() != before, nil
}

func applyOptions() metav1.PatchOptions {
	return metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}
}
