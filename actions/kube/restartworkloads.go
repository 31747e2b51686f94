package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// RestartWorkloadsAction restarts the DaemonSets and Deployments of some
// namespaces, as kubectl rollout restart does, and waits until they are
// rolled out.
const RestartWorkloadsAction = "kube.restart-workloads"

// RestartWorkloadsInput names the namespaces and the mark of the restart.
type RestartWorkloadsInput struct {
	Cluster    target.Kube `json:"cluster"`
	Namespaces []string    `json:"namespaces" kedge:"required" doc:"the namespaces whose DaemonSets and Deployments restart, e.g. kube-system"`
	// Mark is set on each pod template (kedge.dev/restart): a workload
	// that has it already is not restarted again (a retried step).
	Mark    string `json:"mark" kedge:"required" doc:"why, set on each pod template as kedge.dev/restart: a workload carrying it already is not restarted again"`
	Timeout string `json:"timeout,omitempty" kedge:"duration" doc:"give up waiting for the rollouts after this long (default 10m)"`
}

// RestartWorkloadsResult lists what restarted (namespace/kind/name).
type RestartWorkloadsResult struct {
	Restarted []string `json:"restarted"`
}

func init() {
	spec.Register(spec.Row{Name: RestartWorkloadsAction, Doc: "restart every DaemonSet and Deployment of some namespaces (their pod templates marked, as kubectl rollout restart does) and wait until each has rolled out; a workload marked so already is left: a CA rotation restarts what reads its in-cluster CA once at start (kube-proxy)",
		In: RestartWorkloadsInput{}, Out: RestartWorkloadsResult{}, Timeout: 15 * time.Minute,
		Summary: `restart the workloads of some namespaces`})
}
