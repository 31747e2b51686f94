package kube

import (
	"fmt"
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// KubeletSkewAction is the action name of KubeletSkew.
const KubeletSkewAction = "kube.kubelet-skew"

// KubeletSkewInput is the kubelet release a node is about to run.
type KubeletSkewInput struct {
	Cluster        target.Kube `json:"cluster"`
	Node           string      `json:"node"`
	KubeletVersion string      `json:"kubeletVersion" kedge:"required" doc:"the kubelet release the node is about to run, e.g. host.pull-image's kubeletVersion output"`
}

// KubeletSkewResult is what the check read of the API servers.
type KubeletSkewResult struct {
	// APIServers is every API server found: each kube-apiserver pod in
	// kube-system by its image, and /version.
	APIServers []Running `json:"apiServers"`
	// Oldest is the oldest of them: what the kubelet is measured against.
	Oldest string `json:"oldest"`
}

// KubeletSkew checks a kubelet release against the API servers it will
// talk to, by Kubernetes' skew policy: never newer than the oldest API
// server (at minor granularity), at most KubeletMaxMinorsBehind minors
// older than it. It returns each problem as a sentence, none when the
// kubelet may run; an unreadable version is a problem too.
func KubeletSkew(node, kubelet string, apiServers []Running) []string {
	k, err := ParseVersion(kubelet)
	if err != nil {
		return []string{fmt.Sprintf("the kubelet for %s: %v", node, err)}
	}
	var problems []string
	var oldest *Running
	var ov Version
	for i, a := range apiServers {
		v, err := ParseVersion(a.Version)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s on %s (%s): %v", a.Component, a.Host, a.From, err))
			continue
		}
		if oldest == nil || v.Compare(ov) < 0 {
			oldest, ov = &apiServers[i], v
		}
	}
	if oldest == nil {
		return append(problems, "no kube-apiserver was found: the kubelet cannot be checked against the API servers it will talk to")
	}
	switch d := k.minorsAfter(ov); {
	case d > 0:
		problems = append(problems, fmt.Sprintf("the kubelet %s for %s is newer than kube-apiserver %s on %s (%s): a kubelet must never be newer than the API server; upgrade the control plane first (cluster-upgrade)",
			k, node, oldest.Version, oldest.Host, oldest.From))
	case -d > KubeletMaxMinorsBehind:
		problems = append(problems, fmt.Sprintf("the kubelet %s for %s is %s behind kube-apiserver %s on %s (%s): a kubelet may be at most %d minors older than the API server",
			k, node, plural(-d, "minor"), oldest.Version, oldest.Host, oldest.From, KubeletMaxMinorsBehind))
	}
	return problems
}

func init() {
	spec.Register(spec.Row{Name: KubeletSkewAction, Doc: "refuse a kubelet release beside the cluster's API servers by Kubernetes' skew policy (UpgradeRefused, not retried): newer than the oldest API server (every kube-apiserver pod's image, and /version), or more than three minors older",
		In: KubeletSkewInput{}, Out: KubeletSkewResult{}, Timeout: 30 * time.Second,
		Summary: `check kubelet {{.In "kubeletVersion"}} for {{.Host}} against the API servers`})
}
