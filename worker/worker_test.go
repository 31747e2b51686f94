package worker

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/activities/sshhost"

	"kedge.dev/kedge/actions/host"
)

type names []string

func (n *names) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	*n = append(*n, o.Name)
}

// The worker registers exactly the table's actions: every action a runbook
// may name has an implementation of the table's types behind it, and
// nothing is registered that the table (and so the validator) does not
// know.
func TestActionsMatchTheTable(t *testing.T) {
	var got names
	pool, err := registerActions(&got, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	slices.Sort(got)
	if want := actions.Names(); !slices.Equal(got, want) {
		t.Fatalf("registered %v\ntable      %v", got, want)
	}
}

// A wiring that strays from the table is refused before anything is
// registered: a missing action, one the table does not know, one whose
// input or result is not the table's.
func TestRegisterRefusesWhatTheTableDoesNotSay(t *testing.T) {
	h := &sshhost.Activities{}
	run, _ := actions.Lookup(host.RunAction)
	read, _ := actions.Lookup(host.ReadFileAction)
	table := []actions.Action{run, read}
	for name, c := range map[string]struct {
		impls map[string]any
		want  string
	}{
		"missing":     {map[string]any{host.RunAction: h.Run}, "host.read-file has no implementation"},
		"unknown":     {map[string]any{host.RunAction: h.Run, host.ReadFileAction: h.ReadFile, "host.format-disk": h.Run}, "host.format-disk is implemented but not in the action table"},
		"wrong input": {map[string]any{host.RunAction: h.ReadFile, host.ReadFileAction: h.ReadFile}, "host.run: implemented as func(host.ReadFileInput)"},
		"wrong result": {map[string]any{host.RunAction: h.Run, host.ReadFileAction: func(context.Context, host.ReadFileInput) (host.RunResult, error) {
			return host.RunResult{}, nil
		}}, "host.read-file: implemented as func(host.ReadFileInput) host.RunResult"},
		"not a func": {map[string]any{host.RunAction: h.Run, host.ReadFileAction: "read"}, "host.read-file: string is not func"},
	} {
		t.Run(name, func(t *testing.T) {
			var got names
			err := register(&got, table, c.impls)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
			if len(got) != 0 {
				t.Errorf("registered %v despite the mismatch", got)
			}
		})
	}
}
