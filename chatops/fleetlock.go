package chatops

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/fleetlock"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/workflows"
)

// FleetLockPrefix is where the FleetLock endpoint is mounted: a node's
// base URL is {public URL}/fleetlock/CLUSTER/NODE/TOKEN/.
const FleetLockPrefix = "/fleetlock/"

// The runbooks the FleetLock coordinator runs on a node.
const (
	fleetLockDrainRunbook   = "fleetlock-drain"
	fleetLockReleaseRunbook = "fleetlock-release"
)

// fleetLockHandler serves FleetLock for the clusters whose config has a
// fleetLock section: a node is known by its inventory's fleetLockId,
// its token is derived from the cluster's key, and every decision is the
// cluster's coordinator workflow's (workflows.FleetLock).
func (s *Server) fleetLockHandler() http.Handler {
	return fleetlock.New(fleetlock.Options{
		Prefix: FleetLockPrefix,
		Keys: func(cluster string) ([]byte, error) {
			fc, ok := s.Config.FleetLock[cluster]
			if !ok {
				return nil, fmt.Errorf("cluster %q serves no FleetLock", cluster)
			}
			return fc.Key, nil
		},
		Nodes: func(cluster, node string) (fleetlock.NodeInfo, error) {
			c, err := s.fleetLockCluster(cluster)
			if err != nil {
				return fleetlock.NodeInfo{}, err
			}
			n, ok := c.Node(node)
			if !ok {
				return fleetlock.NodeInfo{}, nil // unknown: no client ID
			}
			return fleetlock.NodeInfo{ClientID: n.FleetLockID, Group: fleetlock.DefaultGroup}, nil
		},
		Coordinator: lockCoordinator{s},
		Logger:      s.log(),
	})
}

func (s *Server) fleetLockCluster(name string) (*inventory.Cluster, error) {
	l, err := s.fleetLockLoad(name)
	if err != nil {
		return nil, err
	}
	return l.cluster, l.invErr
}

// fleetLockLoad is the cluster's inventory and runbooks, parsed again
// only when their files changed.
func (s *Server) fleetLockLoad(name string) (*fleetLockLoad, error) {
	path, ok := s.Config.Clusters[name]
	if !ok {
		return nil, fmt.Errorf("unknown cluster %q", name)
	}
	return s.flFiles.load(name, path, s.Config.RunbookPath), nil
}

// lockCoordinator asks a cluster's coordinator workflow, starting it
// when it does not run.
type lockCoordinator struct{ s *Server }

func (c lockCoordinator) PreReboot(ctx context.Context, r fleetlock.Request) (fleetlock.Decision, error) {
	return c.ask(ctx, r, workflows.FleetLockPreRebootUpdate)
}

func (c lockCoordinator) SteadyState(ctx context.Context, r fleetlock.Request) (fleetlock.Decision, error) {
	return c.ask(ctx, r, workflows.FleetLockSteadyStateUpdate)
}

func (c lockCoordinator) ask(ctx context.Context, r fleetlock.Request, update string) (fleetlock.Decision, error) {
	s := c.s
	in, err := s.fleetLockInput(r.Cluster)
	if err != nil {
		return fleetlock.Decision{}, err
	}
	// Started when it does not run (the same one otherwise), then asked.
	// (Not in one update-with-start: its update is encoded without the
	// workflow it is for, which the payload codec's binding refuses.)
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.FleetLockWorkflowID(r.Cluster),
		TaskQueue:                s.taskQueue(),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "FleetLock coordinator of " + r.Cluster,
	}, workflows.FleetLockWorkflow, in)
	if err != nil {
		return fleetlock.Decision{}, fmt.Errorf("fleetlock %s: start the coordinator: %w", r.Cluster, err)
	}
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   run.GetID(),
		UpdateName:   update,
		Args:         []any{workflows.FleetLockRequest{Node: r.Node, ClientID: r.ClientID, Group: r.Group}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fleetlock.Decision{}, fmt.Errorf("fleetlock %s/%s: %w", r.Cluster, r.Node, err)
	}
	var a workflows.FleetLockAnswer
	if err := h.Get(ctx, &a); err != nil {
		return fleetlock.Decision{}, fmt.Errorf("fleetlock %s/%s: %w", r.Cluster, r.Node, err)
	}
	return fleetlock.Decision{Granted: a.Granted, Reason: a.Reason}, nil
}

// fleetLockInput is the coordinator's input for a cluster, used when it
// does not run yet: the inventory, the runbooks it runs on a node, the
// config's slots, lost-after and drain timeout, and the inventory's
// maintenance window.
func (s *Server) fleetLockInput(cluster string) (workflows.FleetLockInput, error) {
	fc, ok := s.Config.FleetLock[cluster]
	if !ok {
		return workflows.FleetLockInput{}, fmt.Errorf("cluster %q serves no FleetLock", cluster)
	}
	l, err := s.fleetLockLoad(cluster)
	if err != nil {
		return workflows.FleetLockInput{}, err
	}
	if l.invErr != nil {
		return workflows.FleetLockInput{}, l.invErr
	}
	if l.rbErr != nil {
		return workflows.FleetLockInput{}, l.rbErr
	}
	if fc.DrainTimeout > 0 && !slices.ContainsFunc(l.drain.Params, func(p runbooks.Param) bool { return p.Name == "drainTimeout" }) {
		return workflows.FleetLockInput{}, fmt.Errorf("fleetlock: runbook %s has no param drainTimeout, which the config's clusters.%s.fleetLock.drainTimeout sets", fleetLockDrainRunbook, cluster)
	}
	return workflows.FleetLockInput{Cluster: *l.cluster, Drain: l.drain, Release: l.release, Slots: fc.Slots,
		Window: l.cluster.Maintenance, LostAfter: fc.LostAfter, DrainTimeout: fc.DrainTimeout, IssuedAt: s.now()}, nil
}
