package searchattr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// Names of Kedge's search attributes.
const (
	Cluster = "KedgeCluster" // the inventory's cluster name
	Runbook = "KedgeRunbook" // the runbook a run executes (a rollout: its parent's)
	Node    = "KedgeNode"    // the one node a run works on, when it works on one
	Status  = "KedgeStatus"  // one of the Status* values, kept current by the workflow
)

// Keys for typed search attributes.
var (
	ClusterKey = temporal.NewSearchAttributeKeyKeyword(Cluster)
	RunbookKey = temporal.NewSearchAttributeKeyKeyword(Runbook)
	NodeKey    = temporal.NewSearchAttributeKeyKeyword(Node)
	StatusKey  = temporal.NewSearchAttributeKeyKeyword(Status)
)

// Values of KedgeStatus.
const (
	StatusRunning         = "running"
	StatusWaitingApproval = "waiting-approval" // an approval step waits for `kedge approve`
	StatusPaused          = "paused"           // a rollout stopped at its failure budget or by its alert gate
	StatusSucceeded       = "succeeded"
	StatusFailed          = "failed"
	StatusCancelled       = "cancelled"
)

// Definitions are the attributes and their types, as registered.
func Definitions() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		Cluster: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		Runbook: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		Node:    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		Status:  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// Names lists the attributes' names, sorted.
func Names() []string {
	var names []string
	for n := range Definitions() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ErrWrongType: the namespace has an attribute of that name with another type.
var ErrWrongType = errors.New("search attribute exists with another type")

// Missing lists which of attrs the namespace lacks, sorted. An attribute
// that exists with another type is an ErrWrongType error.
func Missing(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, attrs map[string]enumspb.IndexedValueType) ([]string, error) {
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	var missing []string
	for name, want := range attrs {
		got, ok := have.GetCustomAttributes()[name]
		if !ok {
			got, ok = have.GetSystemAttributes()[name]
		}
		switch {
		case !ok:
			missing = append(missing, name)
		case got != want:
			return nil, fmt.Errorf("%w: %s is %v, want %v", ErrWrongType, name, got, want)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// Ensure adds those of attrs that the namespace lacks, through the
// operator service, and returns their names. It is idempotent.
func Ensure(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, attrs map[string]enumspb.IndexedValueType) ([]string, error) {
	missing, err := Missing(ctx, op, namespace, attrs)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range missing {
		add[name] = attrs[name]
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add})
	var exists *serviceerror.AlreadyExists
	if errors.As(err, &exists) {
		// Another process added some of them meanwhile.
		still, lerr := Missing(ctx, op, namespace, attrs)
		if lerr == nil && len(still) == 0 {
			return missing, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("add search attributes %s to namespace %s: %w", strings.Join(missing, ", "), namespace, err)
	}
	return missing, nil
}

// IsMissing reports whether err is the server refusing a request because
// one of Kedge's search attributes is not registered on the namespace (a
// start that sets them, a list that filters by them).
func IsMissing(err error) bool {
	if err == nil {
		return false
	}
	// third-party message: the Temporal server refuses an unknown search
	// attribute as InvalidArgument with only its text to tell it apart.
	msg := err.Error()
	lower := strings.ToLower(msg)
	if !strings.Contains(lower, "search attribute") && !strings.Contains(lower, "no mapping defined") {
		return false
	}
	for name := range Definitions() {
		if strings.Contains(msg, name) {
			return true
		}
	}
	return false
}
