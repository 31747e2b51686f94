package kube

import (
	"context"
	"encoding/json"

	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"kedge.dev/kedge/activities/render"
)

// InstallKubeProxyAction installs or updates kube-proxy on the cluster.
const InstallKubeProxyAction = "kube.install-kube-proxy"

// fieldManager owns the fields Kedge applies (server-side apply).
const fieldManager = "kedge"

// InstallKubeProxyInput is render.KubeProxyInput on a cluster.
type InstallKubeProxyInput struct {
	Cluster Cluster `json:"cluster"`
	Image   string  `json:"image" kedge:"required" doc:"kube-proxy's image, e.g. registry.k8s.io/kube-proxy:v1.35.4"`
	Server  string  `json:"server" kedge:"required" doc:"the API server's https URL as every node reaches it (not the kubernetes Service)"`
	PodCIDR string  `json:"podCIDR,omitempty" doc:"the cluster's pod network (default 10.244.0.0/16)"`
}

// InstallKubeProxy renders kube-proxy (render.KubeProxy) and applies it
// server-side as field manager kedge, forcing its own fields: run again
// with the same input it changes nothing; with a new image it rolls the
// DaemonSet one node at a time.
func (a *Activities) InstallKubeProxy(ctx context.Context, in InstallKubeProxyInput) (ChangedResult, error) {
	objs, err := render.KubeProxy(render.KubeProxyInput{Image: in.Image, Server: in.Server, PodCIDR: in.PodCIDR})
	if err != nil {
		return ChangedResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidInput, nil)
	}
	cs, err := a.client(in.Cluster)
	if err != nil {
		return ChangedResult{}, err
	}
	var res ChangedResult
	for _, o := range []struct {
		name  string
		obj   any
		apply func(data []byte) (string, string, error) // resourceVersion before and after
	}{
		{"ServiceAccount", objs.ServiceAccount, func(data []byte) (string, string, error) {
			c := cs.CoreV1().ServiceAccounts(render.KubeProxyNamespace)
			before, _ := c.Get(ctx, render.KubeProxyName, metav1.GetOptions{})
			after, err := c.Patch(ctx, render.KubeProxyName, types.ApplyPatchType, data, applyOptions())
			return rv(before), rv(after), err
		}},
		{"ClusterRoleBinding", objs.Binding, func(data []byte) (string, string, error) {
			c := cs.RbacV1().ClusterRoleBindings()
			before, _ := c.Get(ctx, objs.Binding.Name, metav1.GetOptions{})
			after, err := c.Patch(ctx, objs.Binding.Name, types.ApplyPatchType, data, applyOptions())
			return rv(before), rv(after), err
		}},
		{"ConfigMap", objs.Kubeconfig, func(data []byte) (string, string, error) {
			c := cs.CoreV1().ConfigMaps(render.KubeProxyNamespace)
			before, _ := c.Get(ctx, render.KubeProxyName, metav1.GetOptions{})
			after, err := c.Patch(ctx, render.KubeProxyName, types.ApplyPatchType, data, applyOptions())
			return rv(before), rv(after), err
		}},
		{"DaemonSet", objs.DaemonSet, func(data []byte) (string, string, error) {
			c := cs.AppsV1().DaemonSets(render.KubeProxyNamespace)
			before, _ := c.Get(ctx, render.KubeProxyName, metav1.GetOptions{})
			after, err := c.Patch(ctx, render.KubeProxyName, types.ApplyPatchType, data, applyOptions())
			return rv(before), rv(after), err
		}},
	} {
		data, err := json.Marshal(o.obj)
		if err != nil {
			return res, err
		}
		before, after, err := o.apply(data)
		if err != nil {
			return res, clusterError("apply kube-proxy's "+o.name, err)
		}
		res.Changed = res.Changed || before != after
		heartbeat(ctx, o.name)
	}
	return res, nil
}

func applyOptions() metav1.PatchOptions {
	return metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}
}

// rv is an object's resourceVersion ("" for none: a Get that failed).
func rv(o interface{ GetResourceVersion() string }) string {
	if o == nil {
		return ""
	}
	return o.GetResourceVersion()
}
