// Package kube declares the actions that act on a cluster through the
// Kubernetes API (kube.cordon, kube.drain, kube.wait-node,
// kube.create-bootstrap-token, ...): their names and their input and
// result types, as runbooks and the workflow see them.
//
// It is pure data: it must never import a client (client-go, kubectl) or
// the Temporal SDK, so the action table, the runbook language and the
// workflow can name these actions without linking them. The actions are
// implemented by kedge.dev/kedge/activities/kubeapi.
package kube
