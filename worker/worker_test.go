package worker

import (
	"slices"
	"testing"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/actions"
)

type names []string

func (n *names) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	*n = append(*n, o.Name)
}

// Every action a runbook may name has an activity behind it, and nothing
// is registered that the catalog (and so the validator) does not know.
func TestEveryCatalogActionIsRegistered(t *testing.T) {
	var got names
	pool := registerActions(&got, Options{})
	defer pool.Close()
	slices.Sort(got)
	want := actions.Names()
	if !slices.Equal(got, want) {
		t.Fatalf("registered %v\ncatalog    %v", got, want)
	}
}
