package workflows

import "strings"

// Workflow IDs: one scheme for every run, wherever it was started.
//
//   - A top-level run is RUNBOOK/CLUSTER/TAG. The CLI's tag is the start
//     time and a random suffix, chat's is derived from the request, a
//     schedule's is "scheduled-" and the time Temporal appends. So status,
//     approvals, authorization and the one-run-per-cluster check find a
//     run's runbook and cluster in its ID, and every run of a runbook on a
//     cluster shares the prefix RunPrefix.
//   - A run a step starts (a child runbook, a rollout) is PARENT/STEP.
//   - A node's runbook in a rollout is CLUSTER/node/NODE: two runbooks can
//     never work on one node at once, the second start is refused.

// RunPrefix is what every top-level run of runbook on cluster starts with.
func RunPrefix(runbook, cluster string) string { return runbook + "/" + cluster + "/" }

// RunWorkflowID is a top-level run's ID.
func RunWorkflowID(runbook, cluster, tag string) string { return RunPrefix(runbook, cluster) + tag }

// ScheduledWorkflowID is the workflow ID a schedule's action names;
// Temporal appends "-" and the time of each run it starts.
func ScheduledWorkflowID(runbook, cluster string) string {
	return RunWorkflowID(runbook, cluster, "scheduled")
}

// ChildWorkflowID is the ID of the run a step starts (a child runbook or
// a rollout): its parent's ID and the step's.
func ChildWorkflowID(parent, step string) string {
	return parent + "/" + step
}

// NodeWorkflowID is the ID of the child runbook working on one node. It
// names only the cluster and the node, so two runbooks can never work on
// the same node at once: the second start is refused.
func NodeWorkflowID(cluster, node string) string {
	return cluster + "/node/" + node
}

// ClustersOf is the cluster a workflow ID names, read both ways it can
// be: RUNBOOK/CLUSTER[/...] for a run and all it starts (and the
// two-part IDs chat used once), CLUSTER/node/NODE[/...] for a node's
// runbook in a rollout. A caller checks whether any of them is one it
// may see.
func ClustersOf(id string) []string {
	parts := strings.SplitN(id, "/", 3)
	var out []string
	if len(parts) > 1 {
		out = append(out, parts[1])
	}
	if len(parts) > 2 && parts[1] == "node" {
		out = append(out, parts[0])
	}
	return out
}

// DefaultTaskQueue is the task queue runbooks run on unless told
// otherwise: the worker polls it and every front door starts runs on it.
const DefaultTaskQueue = "kedge"
