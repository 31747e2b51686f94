package runs

import (
	"errors"
	"fmt"
	"strings"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/plan"
	"kedge.dev/kedge/workflows"
)

// Policy is what a front door lets its callers start.
type Policy struct {
	// Library finds runbooks by name (built-in and the runbook path).
	Library *runbooks.Library
	// Files lets a runbook be named by its file (a name holding "/" or
	// "."): the CLI's operator has the files; chat names runbooks only.
	Files bool
	// Internal lets the caller start a runbook that other runbooks call
	// (metadata.internal): the CLI's operator, who holds the keys such a
	// runbook takes. Chat and webhooks never start one.
	Internal bool
	// Cluster is the name the front door knows the inventory's cluster
	// by ("" = any): runs are authorized and found by the inventory's
	// name, so the two must agree.
	Cluster string
}

// Prepared is a runbook ready to start: loaded against its cluster's
// inventory, its params resolved, its plan made.
type Prepared struct {
	Loaded   *runbooks.Loaded
	Children map[string]runbooks.Runbook
	Cluster  *inventory.Cluster
	Plan     *plan.Plan
}

// Input is the run's workflow input (runs.Start admits it).
func (p *Prepared) Input() workflows.RunbookInput {
	return workflows.RunbookInput{
		Runbook:  *p.Loaded.Runbook,
		Params:   p.Plan.StartParams(),
		Cluster:  *p.Cluster,
		Children: p.Children,
	}
}

// Refusal says why a start was refused before anything started; front
// doors map it to an exit code or an HTTP status.
type Refusal int

// Refusals, in the order Prepare meets them.
const (
	BadInventory    Refusal = iota + 1 // the inventory file does not load
	WrongCluster                       // the inventory names another cluster than the door knows it by
	NoRunbook                          // no runbook has the name
	BadRunbook                         // the runbook does not load against the inventory
	InternalRunbook                    // the runbook is internal and the policy does not start those
	BadParams                          // the params do not resolve (plan.ParamsError's list)
	CannotRun                          // the runbook cannot run on this cluster
)

// PrepareError is Prepare's error: what was refused, and why.
type PrepareError struct {
	Refusal Refusal
	Runbook string // as asked for
	Cluster string // the inventory's cluster, once loaded
	Err     error
}

func (e *PrepareError) Error() string {
	switch e.Refusal {
	case BadInventory:
		return fmt.Sprintf("invalid inventory:\n%v", e.Err)
	case WrongCluster, InternalRunbook:
		return e.Err.Error()
	case NoRunbook:
		return fmt.Sprintf("no runbook named %q", e.Runbook)
	case BadRunbook:
		return fmt.Sprintf("invalid runbook %s:\n%v", e.Runbook, e.Err)
	case BadParams:
		return fmt.Sprintf("bad params for %s:\n%v", e.Runbook, e.Err)
	}
	return fmt.Sprintf("%s cannot run on %s:\n%v", e.Runbook, e.Cluster, e.Err)
}

func (e *PrepareError) Unwrap() error { return e.Err }

// Prepare is the one way a start is made ready, for every front door (the
// CLI's run, plan and schedule; chat and webhooks): the inventory loads,
// the runbook loads against it and is one the policy starts, and its
// params resolve into a plan. It never contacts Temporal or a host; the
// one-run-per-cluster rule is the admission's (Holders).
func Prepare(inventoryFile, runbook string, params map[string]any, policy Policy) (*Prepared, error) {
	refuse := func(r Refusal, cluster string, err error) (*Prepared, error) {
		return nil, &PrepareError{Refusal: r, Runbook: runbook, Cluster: cluster, Err: err}
	}
	cluster, err := inventory.LoadFile(inventoryFile)
	if err != nil {
		return refuse(BadInventory, "", err)
	}
	if policy.Cluster != "" && cluster.Name != policy.Cluster {
		return refuse(WrongCluster, cluster.Name, fmt.Errorf("the inventory of %s names the cluster %q; the config must call it that", policy.Cluster, cluster.Name))
	}
	lib := policy.Library
	if lib == nil {
		lib = &runbooks.Library{Builtin: runbooks.Builtin}
	}
	var loaded *runbooks.Loaded
	if policy.Files && strings.ContainsAny(runbook, "/.") {
		loaded, err = lib.LoadFile(runbook, cluster)
	} else {
		loaded, err = lib.Load(runbook, cluster)
	}
	switch {
	case errors.Is(err, runbooks.ErrNoRunbook):
		return refuse(NoRunbook, cluster.Name, err)
	case err != nil:
		return refuse(BadRunbook, cluster.Name, err)
	}
	if loaded.Runbook.Internal && !policy.Internal {
		return refuse(InternalRunbook, cluster.Name, fmt.Errorf("%s is called by other runbooks only: it cannot be started from chat or a webhook", loaded.Runbook.Name))
	}
	children := loaded.ChildValues()
	p, err := plan.Compile(loaded.Runbook, children, params, cluster)
	var bad *plan.ParamsError
	switch {
	case errors.As(err, &bad):
		return refuse(BadParams, cluster.Name, bad.Err)
	case err != nil:
		return refuse(CannotRun, cluster.Name, err)
	}
	return &Prepared{Loaded: loaded, Children: children, Cluster: cluster, Plan: p}, nil
}
