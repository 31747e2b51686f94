// Package kube holds the actions that act on a cluster through the
// Kubernetes API (client-go): cordon, uncordon, drain, delete-node,
// wait-node and label-taint, as methods of Activities.
//
// Every action is idempotent (cordoning a cordoned node changes nothing),
// heartbeats while it waits, and bounds every wait with a timeout: nothing
// here may wait forever. Credentials come from the kubeconfig the inventory
// names; they are never logged.
package kube
