// Package etcd holds the actions that change an etcd cluster's
// membership through etcd's own API (its JSON gateway on the client
// port), authenticated with a short-lived client certificate Vault issues
// from etcd's CA on the worker: etcd.remove-member takes a controller's
// member out before the controller goes, and refuses when the members
// left could not keep a quorum; etcd.health has every member answer for
// itself and refuses a member that does not, an alarm, no leader, or
// not the members expected (a CA rotation's gate); etcd.snapshot streams
// a snapshot from a healthy voting member, checks it against etcd's own
// sha256, seals it with the codec key (internal/sealstream) and stores it
// (internal/objstore) with a manifest, then applies the retention. A
// snapshot is never held whole in memory and never leaves the worker in
// the clear; the S3 credentials are read from a file only its owner may
// read and never appear in an error or a result.
//
// The action's name and its input and result types are declared in
// kedge.dev/kedge/actions/etcd (pure data); the ones here are aliases.
package etcd
