package kube

import (
	api "kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/target"
)

// Action names, as runbooks spell them, declared in actions/kube.
const (
	CordonAction     = api.CordonAction
	UncordonAction   = api.UncordonAction
	DrainAction      = api.DrainAction
	DeleteNodeAction = api.DeleteNodeAction
	GetNodeAction    = api.GetNodeAction
	WaitNodeAction   = api.WaitNodeAction
	LabelTaintAction = api.LabelTaintAction
	// DeleteLostNodeAction: kube.delete-lost-node.
	DeleteLostNodeAction = api.DeleteLostNodeAction
)

// Cluster says how to reach a cluster's API server. The workflow fills it
// from the inventory's `kubernetes:` section.
type Cluster = target.Kube

// The node actions' inputs and results, declared in actions/kube.
type (
	NodeInput       = api.NodeInput
	NodeResult      = api.NodeResult
	GetNodeResult   = api.GetNodeResult
	DrainInput      = api.DrainInput
	DrainResult     = api.DrainResult
	WaitNodeInput   = api.WaitNodeInput
	WaitNodeResult  = api.WaitNodeResult
	LabelTaintInput = api.LabelTaintInput
	// DeleteLostNodeInput is kube.delete-lost-node's input.
	DeleteLostNodeInput = api.DeleteLostNodeInput
)
