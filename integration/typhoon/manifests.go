package typhoon

import (
	"bytes"
	"fmt"
	"text/template"
)

// ControlPlane is what the static pods of Typhoon's controllers need.
type ControlPlane struct {
	APIServerImage         string
	ControllerManagerImage string
	SchedulerImage         string
	EtcdServers            string // https://domain:2379,...
	ServiceAccountIssuer   string
	ServiceCIDR            string // default 10.3.0.0/16
	PodCIDR                string // default 10.2.0.0/16
	// SharedNetwork adds --bind-address=$(POD_IP) to each component: the
	// test world's hosts share one network namespace, so components on
	// different controllers cannot all listen on 0.0.0.0.
	SharedNetwork bool
}

// StaticPods are a controller's static pod manifests under Typhoon's file
// names, with the flags and host paths terraform-render-bootstrap gives
// them.
func StaticPods(cp ControlPlane) ([]File, error) {
	if cp.ServiceCIDR == "" {
		cp.ServiceCIDR = ServiceCIDR
	}
	if cp.PodCIDR == "" {
		cp.PodCIDR = PodCIDR
	}
	var files []File
	for _, m := range []struct {
		name string
		tmpl *template.Template
	}{{"kube-apiserver.yaml", apiserverPod}, {"kube-controller-manager.yaml", controllerManagerPod}, {"kube-scheduler.yaml", schedulerPod}} {
		name, tmpl := m.name, m.tmpl
		var b bytes.Buffer
		if err := tmpl.Execute(&b, cp); err != nil {
			return nil, fmt.Errorf("typhoon: %s: %w", name, err)
		}
		files = append(files, File{Path: ManifestsDir + "/" + name, Mode: 0o644, Data: b.Bytes()})
	}
	return files, nil
}

// shared are the blocks the manifests have in common: the pod's IP in
// the container's environment, and the host path of its secrets.
const shared = `{{define "podIP"}}
    env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
{{- end}}
{{- define "secrets"}}
    volumeMounts:
    - name: secrets
      mountPath: {{.}}
      readOnly: true
  volumes:
  - name: secrets
    hostPath:
      path: {{.}}
{{- end}}`

var apiserverPod = parse("kube-apiserver", shared+`apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels:
    k8s-app: kube-apiserver
    tier: control-plane
spec:
  hostNetwork: true
  priorityClassName: system-cluster-critical
  containers:
  - name: kube-apiserver
    image: {{.APIServerImage}}
    command:
    - kube-apiserver
    - --advertise-address=$(POD_IP)
    - --allow-privileged=true
{{- if .SharedNetwork}}
    - --bind-address=$(POD_IP)
{{- end}}
    - --anonymous-auth=false
    - --authorization-mode=Node,RBAC
    - --client-ca-file=/etc/kubernetes/pki/ca.crt
    - --enable-admission-plugins=NodeRestriction
    - --enable-bootstrap-token-auth=true
    - --etcd-cafile=/etc/kubernetes/pki/etcd-client-ca.crt
    - --etcd-certfile=/etc/kubernetes/pki/etcd-client.crt
    - --etcd-keyfile=/etc/kubernetes/pki/etcd-client.key
    - --etcd-servers={{.EtcdServers}}
    - --kubelet-client-certificate=/etc/kubernetes/pki/apiserver.crt
    - --kubelet-client-key=/etc/kubernetes/pki/apiserver.key
    - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname
    - --secure-port=6443
    - --service-account-issuer={{.ServiceAccountIssuer}}
    - --service-account-jwks-uri={{.ServiceAccountIssuer}}/openid/v1/jwks
    - --service-account-key-file=/etc/kubernetes/pki/service-account.pub
    - --service-account-signing-key-file=/etc/kubernetes/pki/service-account.key
    - --service-cluster-ip-range={{.ServiceCIDR}}
    - --tls-cert-file=/etc/kubernetes/pki/apiserver.crt
    - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key
{{- template "podIP"}}
{{- template "secrets" "/etc/kubernetes/pki"}}
`)

var controllerManagerPod = parse("kube-controller-manager", shared+`apiVersion: v1
kind: Pod
metadata:
  name: kube-controller-manager
  namespace: kube-system
  labels:
    k8s-app: kube-controller-manager
    tier: control-plane
spec:
  hostNetwork: true
  priorityClassName: system-cluster-critical
  containers:
  - name: kube-controller-manager
    image: {{.ControllerManagerImage}}
    command:
    - kube-controller-manager
    - --authentication-kubeconfig=/etc/kubernetes/pki/controller-manager.conf
    - --authorization-kubeconfig=/etc/kubernetes/pki/controller-manager.conf
    - --allocate-node-cidrs=true
{{- if .SharedNetwork}}
    - --bind-address=$(POD_IP)
{{- end}}
    - --client-ca-file=/etc/kubernetes/pki/ca.crt
    - --cluster-cidr={{.PodCIDR}}
    - --cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt
    - --cluster-signing-key-file=/etc/kubernetes/pki/ca.key
    - --cluster-signing-duration=72h
    - --controllers=*,tokencleaner
    - --configure-cloud-routes=false
    - --kubeconfig=/etc/kubernetes/pki/controller-manager.conf
    - --leader-elect=true
    - --root-ca-file=/etc/kubernetes/pki/ca.crt
    - --service-account-private-key-file=/etc/kubernetes/pki/service-account.key
    - --service-cluster-ip-range={{.ServiceCIDR}}
    - --use-service-account-credentials=true
{{- if .SharedNetwork}}{{template "podIP"}}{{end}}
{{- template "secrets" "/etc/kubernetes/pki"}}
`)

var schedulerPod = parse("kube-scheduler", shared+`apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
  labels:
    k8s-app: kube-scheduler
    tier: control-plane
spec:
  hostNetwork: true
  priorityClassName: system-cluster-critical
  containers:
  - name: kube-scheduler
    image: {{.SchedulerImage}}
    command:
    - kube-scheduler
    - --authentication-kubeconfig=/etc/kubernetes/pki/scheduler.conf
    - --authorization-kubeconfig=/etc/kubernetes/pki/scheduler.conf
{{- if .SharedNetwork}}
    - --bind-address=$(POD_IP)
{{- end}}
    - --kubeconfig=/etc/kubernetes/pki/scheduler.conf
    - --leader-elect=true
{{- if .SharedNetwork}}{{template "podIP"}}{{end}}
{{- template "secrets" "/etc/kubernetes/pki/scheduler.conf"}}
`)
