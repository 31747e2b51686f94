package kube

import (
	"fmt"
	"slices"
)

// The components an upgrade reads and changes, as Kubernetes' version
// skew policy names them.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kubelet           = "kubelet"
	KubeProxy         = "kube-proxy"
)

// Running is one component of a cluster as a plan found it running.
type Running struct {
	Component string `json:"component"`
	// Host is the controller or Node it runs on.
	Host    string `json:"host"`
	Version string `json:"version"`
	// From says where the version was read: "status.nodeInfo of Node
	// tyw1", "image of /etc/kubernetes/manifests/kube-apiserver.yaml".
	From string `json:"from"`
}

// KubeletMaxMinorsBehind is how many minors a kubelet (or kube-proxy) may
// be older than the API server (Kubernetes' skew policy since v1.28).
const KubeletMaxMinorsBehind = 3

// UpgradeSkew checks an upgrade of running to target against Kubernetes'
// version skew policy, before anything changes:
//
//   - no minor is skipped and nothing goes back: the oldest API server is
//     at target's minor or the one before it, none is newer than target;
//   - the API servers already span at most one minor;
//   - no controller manager or scheduler is newer than the oldest API
//     server, nor more than one minor behind target;
//   - no kubelet or kube-proxy is newer than the oldest API server or
//     target, nor more than KubeletMaxMinorsBehind minors behind target
//     (it would be out of policy until its own turn comes).
//
// It returns each problem as a sentence naming the host, the component,
// its version and where it was read; none when the upgrade may start.
// An unreadable version is a problem too. When the API servers refuse
// the target, that is the only problem given.
func UpgradeSkew(target string, running []Running) []string {
	t, err := ParseVersion(target)
	if err != nil {
		return []string{fmt.Sprintf("version: %v", err)}
	}
	var problems []string
	add := func(r Running, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("%s on %s runs %s (%s): ", r.Component, r.Host, r.Version, r.From)+fmt.Sprintf(format, a...))
	}
	type seen struct {
		r Running
		v Version
	}
	byKind := map[string][]seen{}
	for _, r := range running {
		v, err := ParseVersion(r.Version)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s on %s (%s): %v", r.Component, r.Host, r.From, err))
			continue
		}
		byKind[r.Component] = append(byKind[r.Component], seen{r, v})
	}
	apis := byKind[APIServer]
	if len(apis) == 0 {
		return append(problems, "no kube-apiserver was found: the plan cannot tell which version the cluster runs")
	}
	oldest, newest := apis[0], apis[0]
	for _, a := range apis[1:] {
		if a.v.Compare(oldest.v) < 0 {
			oldest = a
		}
		if a.v.Compare(newest.v) > 0 {
			newest = a
		}
	}
	switch d := t.minorsAfter(oldest.v); {
	case newest.v.minorsAfter(oldest.v) > 1:
		add(newest.r, "newer than %s on %s (%s) by more than one minor: out of Kubernetes' skew policy already", oldest.r.Version, oldest.r.Host, APIServer)
	case d > 1:
		add(oldest.r, "%s would skip %s: upgrade one minor at a time (to %s.x first)", t, plural(d-1, "minor"), Version{Major: oldest.v.Major, Minor: oldest.v.Minor + 1}.MinorString())
	case d < 0:
		add(oldest.r, "%s is an older minor: Kedge upgrades, it does not downgrade (restore an etcd snapshot taken before the upgrade instead)", t)
	case t.Compare(newest.v) < 0:
		add(newest.r, "newer than %s: Kedge does not downgrade", t)
	}
	// A target the API servers refuse is the one problem to fix: every
	// other component measured against it would only repeat it.
	if len(problems) > 0 {
		return problems
	}
	for _, kind := range []string{ControllerManager, Scheduler} {
		for _, c := range byKind[kind] {
			if c.v.minorsAfter(oldest.v) > 0 {
				add(c.r, "newer than %s on %s (%s): a %s must never be newer than the API servers it talks to", APIServer, oldest.r.Host, oldest.r.Version, kind)
			}
			if d := t.minorsAfter(c.v); d > 1 {
				add(c.r, "%s behind %s: a %s may be one minor older than the API server, no more", plural(d, "minor"), t, kind)
			}
		}
	}
	for _, kind := range []string{Kubelet, KubeProxy} {
		for _, k := range byKind[kind] {
			switch {
			case k.v.minorsAfter(t) > 0:
				add(k.r, "newer than %s: a %s must never be newer than the API server", t, kind)
			case k.v.minorsAfter(oldest.v) > 0:
				add(k.r, "newer than %s on %s (%s): a %s must never be newer than the API server", APIServer, oldest.r.Host, oldest.r.Version, kind)
			}
			if d := t.minorsAfter(k.v); d > KubeletMaxMinorsBehind {
				add(k.r, "%s behind %s: a %s may be at most %d minors older than the API server; upgrade it first", plural(d, "minor"), t, kind, KubeletMaxMinorsBehind)
			}
		}
	}
	slices.Sort(problems)
	return slices.Compact(problems)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
