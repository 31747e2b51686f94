package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// InstallKubeProxyAction installs or updates kube-proxy on the cluster.
const InstallKubeProxyAction = "kube.install-kube-proxy"

// InstallKubeProxyInput is render.KubeProxyInput on a cluster.
type InstallKubeProxyInput struct {
	Cluster target.Kube `json:"cluster"`
	Image   string      `json:"image" kedge:"required" doc:"kube-proxy's image, e.g. registry.k8s.io/kube-proxy:v1.35.4"`
	Server  string      `json:"server" kedge:"required" doc:"the API server's https URL as every node reaches it (not the kubernetes Service)"`
	PodCIDR string      `json:"podCIDR,omitempty" doc:"the cluster's pod network (default 10.244.0.0/16)"`
}

func init() {
	spec.Register(spec.Row{Name: InstallKubeProxyAction, Doc: "install or update kube-proxy (iptables mode, a DaemonSet on every node), applied server-side",
		In: InstallKubeProxyInput{}, Out: ChangedResult{}, Timeout: 2 * time.Minute,
		Summary: `install kube-proxy`})
}
