package starter

import (
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
)

// A call the team server's authorizer refuses says why, not only
// "Request unauthorized.".
func TestARefusedCallSaysWhy(t *testing.T) {
	denied := fmt.Errorf("start: %w", serviceerror.NewPermissionDeniedf("Request unauthorized.", "viewer certificate CN=viewer may not call StartWorkflowExecution"))
	msg := failed("start %s: %v", "hello/lab/1", denied).Error()
	if !strings.Contains(msg, "Request unauthorized.") || !strings.Contains(msg, "viewer certificate CN=viewer may not call StartWorkflowExecution") {
		t.Errorf("message = %q", msg)
	}
	if msg := failed("start: %v", fmt.Errorf("other")).Error(); strings.Contains(msg, "(") {
		t.Errorf("an error that is no refusal gained a reason: %q", msg)
	}
}
