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
// workflow ID, for activity payloads the activity type, and for a
// schedule's action the schedule's ID (its Workflow is the action's
// workflow ID, which Temporal suffixes with each run's time).
type binding struct {
	Kind      string // "workflow", "activity" or "schedule"
	Namespace string
	Workflow  string
	Activity  string
	// Queue is the task queue an activity was scheduled on, whose key
	// seals its payloads (queue.go); "" in what Kedge sealed before queue
	// keys, with the full key.
	Queue    string
	Schedule string
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
		return &binding{Kind: "activity", Namespace: x.Namespace, Workflow: x.WorkflowID, Activity: x.ActivityType, Queue: x.TaskQueue}
	}
	return nil
}

// encode is the binding as stored in the payload's metadata: a JSON
// array, so no ID can be read as another.
func (b *binding) encode() []byte {
	parts := []string{b.Kind, b.Namespace, b.Workflow}
	switch b.Kind {
	case "activity":
		parts = append(parts, b.Activity)
		if b.Queue != "" {
			parts = append(parts, b.Queue)
		}
	case "schedule":
		parts = append(parts, b.Schedule)
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
	case b.Kind == "activity" && len(parts) == 5 && parts[4] != "":
		b.Activity, b.Queue = parts[3], parts[4]
	case b.Kind == "schedule" && len(parts) == 4:
		b.Schedule = parts[3]
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

// admits reports whether a payload bound to raw may open in b's context:
// where it was sealed for, or, for a schedule's action, in a run that
// schedule names by the action's ID and a time. A workflow's own input
// never opens under a suffixed ID: the suffix rule is the schedule's
// alone, and only for payloads sealed as its action (the workflow's
// admission then asks the schedule whether it started the run).
// legacy also admits a workflow payload in a suffixed run, as Kedge
// sealed schedule actions before they were bound to their schedule: only
// while such runs finish after an upgrade (acceptUnbound).
func (b *binding) admits(raw []byte, has, legacy bool) error {
	if !has {
		if legacy {
			return nil
		}
		return ErrUnbound
	}
	got, err := decodeBinding(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMisbound, err)
	}
	if got.Namespace != b.Namespace {
		return fmt.Errorf("%w (sealed for namespace %s, opened in %s)", ErrMisbound, got.Namespace, b.Namespace)
	}
	switch {
	case got.Kind == b.Kind && got.Activity == b.Activity && got.Workflow == b.Workflow && got.Queue != b.Queue && got.Queue != "":
		// Sealed for the activity on another queue: a result forged by
		// that queue's worker. (Queue "" is what the full key sealed
		// before queue keys: only the full key opens it.)
		return fmt.Errorf("%w (sealed for %s on task queue %s, opened as task queue %s's)", ErrMisbound, got.Activity, got.Queue, b.Queue)
	case got.Kind == b.Kind && got.Activity == b.Activity && got.Workflow == b.Workflow:
		return nil
	case got.Kind == "schedule" && b.Kind == "workflow" && scheduledRun(got.Workflow, b.Workflow):
		return nil
	case got.Kind == "workflow" && b.Kind == "workflow" && legacy && scheduledRun(got.Workflow, b.Workflow):
		return nil
	case got.Kind != b.Kind || got.Activity != b.Activity:
		return fmt.Errorf("%w (sealed for %s %s, opened in %s %s)", ErrMisbound, got.Kind, got.Workflow, b.Kind, b.Workflow)
	}
	return fmt.Errorf("%w (sealed for workflow %q, opened in %q)", ErrMisbound, got.Workflow, b.Workflow)
}

// scheduledRun reports whether run is an ID a Temporal schedule gives the
// runs of its action base: the action's ID, "-" and the nominal time.
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
