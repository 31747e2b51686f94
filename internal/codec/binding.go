package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
)

// binding is what a sealed payload was sealed for: a namespace and a
// workflow ID, and for activity payloads the activity type.
type binding struct {
	Kind      string // "workflow" or "activity"
	Namespace string
	Workflow  string
	Activity  string
}

func bindingOf(sc converter.SerializationContext) *binding {
	switch x := sc.(type) {
	case converter.WorkflowSerializationContext:
		if x.WorkflowID == "" {
			return nil
		}
		return &binding{Kind: "workflow", Namespace: x.Namespace, Workflow: x.WorkflowID}
	case converter.ActivitySerializationContext:
		if x.WorkflowID == "" {
			return nil // a standalone activity: Kedge runs none
		}
		return &binding{Kind: "activity", Namespace: x.Namespace, Workflow: x.WorkflowID, Activity: x.ActivityType}
	}
	return nil
}

// encode is the binding as stored in the payload's metadata: a JSON
// array, so no ID can be read as another.
func (b *binding) encode() []byte {
	parts := []string{b.Kind, b.Namespace, b.Workflow}
	if b.Kind == "activity" {
		parts = append(parts, b.Activity)
	}
	out, _ := json.Marshal(parts)
	return out
}

func decodeBinding(raw []byte) (*binding, error) {
	var parts []string
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) < 3 {
		return nil, errors.New("malformed binding")
	}
	b := &binding{Kind: parts[0], Namespace: parts[1], Workflow: parts[2]}
	switch {
	case b.Kind == "workflow" && len(parts) == 3:
	case b.Kind == "activity" && len(parts) == 4:
		b.Activity = parts[3]
	default:
		return nil, errors.New("malformed binding")
	}
	return b, nil
}

// ErrMisbound is a sealed payload opened somewhere it was not sealed for:
// copied from another run, workflow ID or activity.
var ErrMisbound = errors.New("sealed payload belongs to another workflow or activity: refused")

// ErrUnbound is a payload sealed without a binding where one is required.
var ErrUnbound = errors.New("sealed payload is bound to no workflow (sealed by a Kedge before payload binding, or copied from outside a run): refused; while runs started before an upgrade finish, workers may take --accept-unbound-payloads")

// admits reports whether a payload bound to raw may open in b's context.
func (b *binding) admits(raw []byte, has, acceptUnbound bool) error {
	if !has {
		if acceptUnbound {
			return nil
		}
		return ErrUnbound
	}
	got, err := decodeBinding(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMisbound, err)
	}
	if got.Kind != b.Kind || got.Namespace != b.Namespace || got.Activity != b.Activity {
		return fmt.Errorf("%w (sealed for %s %s, opened in %s %s)", ErrMisbound, got.Kind, got.Workflow, b.Kind, b.Workflow)
	}
	if got.Workflow == b.Workflow || (b.Kind == "workflow" && scheduledRun(got.Workflow, b.Workflow)) {
		return nil
	}
	return fmt.Errorf("%w (sealed for workflow %q, opened in %q)", ErrMisbound, got.Workflow, b.Workflow)
}

// scheduledRun reports whether run is an ID a Temporal schedule gives the
// runs of its action base: the action's ID, "-" and the nominal time. A
// schedule's action is sealed once, for its ID; each run it starts opens
// it (which is what triggering the schedule does anyway).
func scheduledRun(base, run string) bool {
	rest, ok := strings.CutPrefix(run, base+"-")
	if !ok {
		return false
	}
	_, err := time.Parse(time.RFC3339, rest)
	return err == nil
}

// additionalData is what a seal authenticates besides the plaintext: the
// key id, and the binding when there is one.
func additionalData(keyID string, bound []byte) []byte {
	if bound == nil {
		return []byte(keyID)
	}
	ad := make([]byte, 0, len(keyID)+1+len(bound))
	ad = append(ad, keyID...)
	ad = append(ad, 0)
	return append(ad, bound...)
}
