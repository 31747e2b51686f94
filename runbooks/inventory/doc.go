// Package inventory loads and validates a cluster inventory (`kind: Cluster`):
// the hosts of one Kubernetes cluster, split into controllers and workers,
// with the SSH settings used to reach them.
//
// The loaded Cluster is a snapshot: the CLI resolves it once, with file
// paths made absolute, and hands it to the workflow as input, so a running
// runbook never reads the inventory file again. This package never dials a
// host.
package inventory
