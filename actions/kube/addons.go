package kube

import "kedge.dev/kedge/actions/target"

// InstallKubeProxyAction installs or updates kube-proxy on the cluster.
const InstallKubeProxyAction = "kube.install-kube-proxy"

// InstallKubeProxyInput is render.KubeProxyInput on a cluster.
type InstallKubeProxyInput struct {
	Cluster target.Kube `json:"cluster"`
	Image   string      `json:"image" kedge:"required" doc:"kube-proxy's image, e.g. registry.k8s.io/kube-proxy:v1.35.4"`
	Server  string      `json:"server" kedge:"required" doc:"the API server's https URL as every node reaches it (not the kubernetes Service)"`
	PodCIDR string      `json:"podCIDR,omitempty" doc:"the cluster's pod network (default 10.244.0.0/16)"`
}
