// Package etcd declares the actions that reach an etcd cluster through
// its API (etcd.remove-member and etcd.add-member, which change its membership, etcd.health,
// which checks every member, and etcd.snapshot, which backs it up sealed
// off the hosts): their names and their input and result types, as
// runbooks and the workflow see them, and the manifest stored beside
// each snapshot.
//
// It is pure data: it must never import an etcd or Vault client or the
// Temporal SDK, so the action table, the runbook language and the workflow
// can name these actions without linking them. The actions are
// implemented by kedge.dev/kedge/activities/etcdapi.
package etcd
