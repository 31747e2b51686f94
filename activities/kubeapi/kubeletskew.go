package kubeapi

import (
	"context"
	"strings"

	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
)

// KubeletSkew refuses a kubelet release that Kubernetes' skew policy
// forbids beside the cluster's API servers (kube.kubelet-skew): newer than
// the oldest of them, or more than three minors older. The API servers
// are every kube-apiserver pod in kube-system, by its image's tag (a
// controller half-way through an upgrade counts with its old release),
// and /version. A refusal is UpgradeRefused, not retried; its result
// still names what was read.
func (a *Activities) KubeletSkew(ctx context.Context, in kube.KubeletSkewInput) (kube.KubeletSkewResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.KubeletSkewResult{}, err
	}
	res := kube.KubeletSkewResult{APIServers: []kube.Running{}}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, apiError("", err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Name != kube.APIServer {
				continue
			}
			from := "image " + c.Image + " of pod kube-system/" + p.Name
			version, ok := imageVersion(c.Image)
			if !ok {
				version = c.Image // reported as unreadable
			}
			res.APIServers = append(res.APIServers, kube.Running{Component: kube.APIServer, Host: apiServerHost(p.Spec.NodeName, p.Name), Version: version, From: from})
		}
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return res, apiError("", err)
	}
	res.APIServers = append(res.APIServers, kube.Running{Component: kube.APIServer, Host: "(the cluster's API)", Version: v.GitVersion, From: "/version"})
	problems := kube.KubeletSkew(in.Node, in.KubeletVersion, res.APIServers)
	for _, s := range res.APIServers {
		if v, err := kube.ParseVersion(s.Version); err == nil {
			if old, err := kube.ParseVersion(res.Oldest); err != nil || v.Compare(old) < 0 {
				res.Oldest = s.Version
			}
		}
	}
	if len(problems) > 0 {
		return res, temporal.NewNonRetryableApplicationError(strings.Join(problems, "; "), errtype.UpgradeRefused, nil, res)
	}
	return res, nil
}

// apiServerHost is the node a kube-apiserver pod runs on, else its name.
func apiServerHost(node, pod string) string {
	if node != "" {
		return node
	}
	return pod
}
