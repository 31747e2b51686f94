// Package etcd declares the actions that change an etcd cluster's
// membership (etcd.remove-member): their names and their input and result
// types, as runbooks and the workflow see them.
//
// It is pure data: it must never import an etcd or Vault client or the
// Temporal SDK, so the action table, the runbook language and the workflow
// can name these actions without linking them. The actions are
// implemented by kedge.dev/kedge/activities/etcd, which aliases these
// types.
package etcd
