// Package etcd holds the actions that change an etcd cluster's
// membership through etcd's own API (its JSON gateway on the client
// port), authenticated with a short-lived client certificate Vault issues
// from etcd's CA on the worker: etcd.remove-member takes a controller's
// member out before the controller goes, and refuses when the members
// left could not keep a quorum; etcd.health has every member answer for
// itself and refuses a member that does not, an alarm, no leader, or
// not the members expected (a CA rotation's gate).
//
// The action's name and its input and result types are declared in
// kedge.dev/kedge/actions/etcd (pure data); the ones here are aliases.
package etcd
