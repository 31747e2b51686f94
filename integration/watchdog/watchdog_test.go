package watchdog

import (
	"strings"
	"testing"
)

const dump = `goroutine 1 [chan receive]:
testing.(*T).Run(0xc000003a40, {0x5b1f2e, 0x8}, 0x5c8d58)
	/go/src/testing/testing.go:1751 +0x3ab

goroutine 7 [select]:
kedge.dev/kedge/starter.waitResult({0x9976c58, 0xc0001}, {0x0, 0x0})
	/src/starter/reconnect.go:89 +0x1
kedge.dev/kedge/integration.TestRolloutSurvivesItsWorkerKilled(0xc000003a40)
	/src/integration/kill_test.go:40 +0x2
testing.tRunner(0xc000003a40, 0x5c8d58)
	/go/src/testing/testing.go:1690 +0xf4

goroutine 9 [IO wait]:
kedge.dev/kedge/integration.TestApproval.func2()
	/src/integration/await_test.go:12 +0x2
created by kedge.dev/kedge/integration.TestApproval in goroutine 8

goroutine 11 [select]:
go.temporal.io/sdk/internal.(*basePoller).doPoll.func1()
	/mod/internal_task_pollers.go:403 +0x4a

goroutine 12 [select]:
kedge.dev/kedge/integration/team.TestChaos(0xc000003a40)
	/src/integration/team/chaos_test.go:1 +0x2
`

func TestReportNamesTheRunningTestsAndTheirStacksOnly(t *testing.T) {
	r := Report("kedge.dev/kedge/integration", []byte(dump))
	if !strings.Contains(r, "  TestApproval\n  TestRolloutSurvivesItsWorkerKilled\n") {
		t.Errorf("names missing or unsorted:\n%s", r)
	}
	if !strings.Contains(r, "reconnect.go:89") {
		t.Errorf("the hung test's stack is missing:\n%s", r)
	}
	for _, not := range []string{"doPoll", "TestChaos", "testing.(*T).Run"} {
		if strings.Contains(r, not) {
			t.Errorf("report has %q, which is no test of the package:\n%s", not, r)
		}
	}
	if !strings.HasSuffix(r, "watchdog: tests running: TestApproval TestRolloutSurvivesItsWorkerKilled\n") {
		t.Errorf("no summary line last:\n%s", r)
	}
}

func TestReportWithoutTests(t *testing.T) {
	if r := Report("kedge.dev/kedge/integration", []byte("goroutine 1 [running]:\nmain.main()\n")); !strings.Contains(r, "no test goroutine") {
		t.Errorf("got %q", r)
	}
}
