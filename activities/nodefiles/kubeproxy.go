package nodefiles

import (
	"bytes"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// kube-proxy, as the cluster's addon: a DaemonSet on every node, its
// ServiceAccount bound to the built-in system:node-proxier role, and a
// kubeconfig that reaches the API server at its real address (the
// kubernetes Service's ClusterIP only works once kube-proxy does).
const (
	KubeProxyName      = "kube-proxy"
	KubeProxyNamespace = "kube-system"
	// kubeProxyConfigDir is where the pod finds its kubeconfig.
	kubeProxyConfigDir = "/var/lib/kube-proxy"
	// serviceAccountDir is where a pod's service account token and the
	// cluster CA are projected.
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// KubeProxyInput is kube-proxy's cluster.
type KubeProxyInput struct {
	// Image is kube-proxy's image (its iptables included, as upstream's).
	Image string `json:"image" kedge:"required" doc:"kube-proxy's image, e.g. registry.k8s.io/kube-proxy:v1.35.4"`
	// Server is the API server's URL as every node reaches it.
	Server string `json:"server" kedge:"required" doc:"the API server's https URL as every node reaches it (not the kubernetes Service)"`
	// PodCIDR is the cluster's pod network (default DefaultPodCIDR): traffic
	// from outside it to a Service is masqueraded.
	PodCIDR string `json:"podCIDR,omitempty" doc:"the cluster's pod network (default 10.244.0.0/16)"`
}

// KubeProxyObjects are what KubeProxy renders, in the order they are
// applied.
type KubeProxyObjects struct {
	ServiceAccount *corev1.ServiceAccount
	Binding        *rbacv1.ClusterRoleBinding
	Kubeconfig     *corev1.ConfigMap
	DaemonSet      *appsv1.DaemonSet
}

// KubeProxy renders kube-proxy in iptables mode on every node, whatever
// its taints: a privileged host-network pod of the system-node-critical
// class, authenticating with its projected service account token.
func KubeProxy(in KubeProxyInput) (KubeProxyObjects, error) {
	var p problems
	checkImage(&p, "image", in.Image)
	checkServerURL(&p, "server", in.Server)
	if in.PodCIDR == "" {
		in.PodCIDR = DefaultPodCIDR
	}
	checkCIDR(&p, "podCIDR", in.PodCIDR)
	if err := p.err(); err != nil {
		return KubeProxyObjects{}, err
	}
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"cluster": {
			Server: in.Server, CertificateAuthority: serviceAccountDir + "/ca.crt",
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{KubeProxyName: {TokenFile: serviceAccountDir + "/token"}},
		Contexts:       map[string]*clientcmdapi.Context{"default": {Cluster: "cluster", AuthInfo: KubeProxyName}},
		CurrentContext: "default",
	})
	if err != nil {
		return KubeProxyObjects{}, err
	}
	meta := metav1.ObjectMeta{Name: KubeProxyName, Namespace: KubeProxyNamespace, Labels: map[string]string{"k8s-app": KubeProxyName}}
	labels := map[string]string{"k8s-app": KubeProxyName}
	hostPath := func(name, path string, t corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}}
	}
	return KubeProxyObjects{
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta,
		},
		Binding: &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "kedge:" + KubeProxyName, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: KubeProxyName, Namespace: KubeProxyNamespace}},
		},
		Kubeconfig: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta,
			Data:       map[string]string{"kubeconfig": string(kubeconfig)},
		},
		DaemonSet: &appsv1.DaemonSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: meta,
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
					Type:          appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
				},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						HostNetwork:        true,
						PriorityClassName:  "system-node-critical",
						ServiceAccountName: KubeProxyName,
						// Every node, whatever its taints: Services work
						// everywhere or nowhere.
						Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						Containers: []corev1.Container{{
							Name:  KubeProxyName,
							Image: in.Image,
							Command: []string{
								"kube-proxy",
								"--cluster-cidr=" + in.PodCIDR,
								"--hostname-override=$(NODE_NAME)",
								"--kubeconfig=" + kubeProxyConfigDir + "/kubeconfig",
								"--proxy-mode=iptables",
							},
							Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
								FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
							}}},
							Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: 10256}},
							LivenessProbe: &corev1.Probe{
								ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(10256)}},
								InitialDelaySeconds: 15,
								TimeoutSeconds:      15,
							},
							SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
							VolumeMounts: []corev1.VolumeMount{
								{Name: "kubeconfig", MountPath: kubeProxyConfigDir, ReadOnly: true},
								{Name: "lib-modules", MountPath: "/lib/modules", ReadOnly: true},
								{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
							},
						}},
						Volumes: []corev1.Volume{
							{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
								LocalObjectReference: corev1.LocalObjectReference{Name: KubeProxyName},
							}}},
							hostPath("lib-modules", "/lib/modules", corev1.HostPathDirectory),
							// The lock every iptables user on the node takes.
							hostPath("xtables-lock", "/run/xtables.lock", corev1.HostPathFileOrCreate),
						},
					},
				},
			},
		},
	}, nil
}

// YAML is the objects as one multi-document file, for review and golden
// tests.
func (o KubeProxyObjects) YAML() ([]byte, error) {
	var b bytes.Buffer
	for i, obj := range []any{o.ServiceAccount, o.Binding, o.Kubeconfig, o.DaemonSet} {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("kube-proxy: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
