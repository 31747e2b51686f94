package sshhost

import (
	"testing"

	"go.temporal.io/sdk/activity"
)

// A restart is recorded per attempt: a second delivery of one attempt
// finds its record (and restarts nothing), the next attempt of the same
// activity (Temporal's retry after a failure or a lost worker) does not.
func TestRestartRecordIsPerAttempt(t *testing.T) {
	info := activity.Info{Namespace: "default", ActivityID: "restart/tyc1#4+3", Attempt: 1}
	info.WorkflowExecution.ID, info.WorkflowExecution.RunID = "wf", "run"
	first := restartDigest(info, "etcd-member.service")
	if again := restartDigest(info, "etcd-member.service"); again != first {
		t.Error("one attempt delivered twice has two records")
	}
	info.Attempt = 2
	if next := restartDigest(info, "etcd-member.service"); next == first {
		t.Error("the next attempt finds the first one's record: it would not restart")
	}
	info.Attempt = 1
	if other := restartDigest(info, "kubelet.service"); other == first {
		t.Error("two units share a record")
	}
}
