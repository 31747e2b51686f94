package workflows

import (
	"context"
	"errors"
	"os"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func writeFile(p, body string) error { return os.WriteFile(p, []byte(body), 0o644) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func decodeInput(can *workflow.ContinueAsNewError, v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, v)
}

// bind fills in what ties d to the pause it answers, as `kedge approve`
// does: the run and the nonce its progress shows (the step's, else the
// paused rollout's).
func bind(t *testing.T, env *testsuite.TestWorkflowEnvironment, d Decision) Decision {
	t.Helper()
	p := progress(t, env)
	d.WorkflowID, d.RunID, d.Nonce = p.WorkflowID, p.RunID, p.Nonce
	for _, s := range p.Steps {
		if s.ID == d.Step && s.Nonce != "" {
			d.Nonce = s.Nonce
		}
	}
	return d
}

// registerAdmit stands in for the worker's admission check: every run is
// the only one of its ID.
func registerAdmit(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, in AdmitRunInput) (AdmitRunResult, error) {
		return AdmitRunResult{WorkflowID: in.WorkflowID, RunID: in.RunID, Admitted: true}, nil
	}, activity.RegisterOptions{Name: AdmitRunActivity})
}

// asChild runs a rollout test's workflow as if a runbook had started it:
// the admission checks (a rollout runs only as a child) are the subject
// of their own tests.
func asChild(env *testsuite.TestWorkflowEnvironment) {
	env.OnGetVersion(admissionChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
}
