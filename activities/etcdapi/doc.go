// Package etcdapi holds the actions that change an etcd cluster's
// membership through etcd's own API (its JSON gateway on the client
// port), authenticated with a short-lived client certificate Vault issues
// from etcd's CA on the worker: etcd.remove-member takes a controller's
// member out before the controller goes, and refuses when the members
// left could not keep a quorum (with lost, also while the member still
// answers as itself: its host is not gone); etcd.add-member adds a new
// controller's member before its etcd starts, only while the healthy
// members stay a quorum of the new size, and gives the initial cluster
// the new member starts with (a member already there with its peer URL
// is success); etcd.health has every member answer for
// itself and refuses a member that does not, an alarm, no leader, or
// not the members expected (a CA rotation's gate); etcd.snapshot streams
// a snapshot from a healthy voting member over etcd's gRPC API (the
// Maintenance service's Snapshot, as etcdctl takes it: the gateway's JSON
// costs etcd and the worker several times the CPU), with the same client
// certificate, checks it against etcd's own sha256 and announced size, seals it with the codec key (internal/sealstream) and stores it
// (internal/objstore) with a manifest, then applies the retention. A
// snapshot is never held whole in memory and never leaves the worker in
// the clear; the S3 credentials are read from a file only its owner may
// read and never appear in an error or a result.
//
// etcd.restore-drill proves a stored snapshot can be restored, without
// touching the cluster: it reads the cluster's newest snapshot (or the
// one named) back from the destination the run names, through the codec
// key's seal into a 0600 file in a directory made for the drill under the
// worker's $TMPDIR, and checks it against its manifest (size, sha256, key
// id) and etcd's own trailing sha256 before anything is restored: a
// tampered, truncated or foreign object is refused (EtcdSnapshotInvalid,
// not retried). It then restores the file with etcd's own code (etcdutl)
// into a new one-member cluster, started in the worker's process with
// etcd's embed package on loopback only (random ports, client and peer
// TLS from a CA made for the drill and thrown away with it), and asks it
// its revision, its key count and the keys expected: fewer than the
// manifest's revision or a key missing fails the drill (EtcdDrillFailed,
// not retried, the result in the failure's details). The throwaway etcd
// is stopped and its directory removed whatever happened; it never
// listens beyond loopback and never joins a cluster of the inventory's.
// The runbook etcd-restore-drill runs it with the keys every Kubernetes
// cluster holds, and is meant to be scheduled weekly.
//
// The actions' names and their input and result types are declared in
// kedge.dev/kedge/actions/etcd (pure data), imported under its own name.
package etcdapi
