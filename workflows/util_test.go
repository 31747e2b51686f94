package workflows

import (
	"errors"
	"os"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

func writeFile(p, body string) error { return os.WriteFile(p, []byte(body), 0o644) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func decodeInput(can *workflow.ContinueAsNewError, v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, v)
}
