package workflows

import (
	"slices"
	"strings"
	"testing"
)

// Every top-level run, wherever it was started, is found under its
// runbook and cluster: the CLI's, chat's and a schedule's (Temporal
// appends "-" and the time to the action's ID). Before one scheme, a
// schedule's runs were RUNBOOK/CLUSTER-TIME: outside chat's busy check and
// unreadable from chat.
func TestEveryRunIsFoundUnderItsRunbookAndCluster(t *testing.T) {
	ids := map[string]string{
		"cli":      RunWorkflowID("cert-renewal", "prod", "20261126-101500-3fa2"),
		"chat":     RunWorkflowID("cert-renewal", "prod", "id-0123456789abcdef"),
		"schedule": ScheduledWorkflowID("cert-renewal", "prod") + "-2026-11-26T10:00:00Z",
	}
	for door, id := range ids {
		if !strings.HasPrefix(id, RunPrefix("cert-renewal", "prod")) {
			t.Errorf("%s: %s is not under %s", door, id, RunPrefix("cert-renewal", "prod"))
		}
		if !slices.Contains(ClustersOf(id), "prod") {
			t.Errorf("%s: %s names clusters %v, not prod", door, id, ClustersOf(id))
		}
		child := ChildWorkflowID(id, "workers")
		if !slices.Contains(ClustersOf(child), "prod") {
			t.Errorf("%s: child %s names clusters %v", door, child, ClustersOf(child))
		}
	}
	if got := ClustersOf(NodeWorkflowID("prod", "worker-7") + "/drain"); !slices.Contains(got, "prod") {
		t.Errorf("a node's runbook names %v", got)
	}
	if got := ClustersOf("just-one-part"); len(got) != 0 {
		t.Errorf("an ID with no cluster names %v", got)
	}
}
