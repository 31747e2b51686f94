// Package trust decides where a worker connects and with what. The
// inventories of the clusters a worker serves, read from the worker's own
// files, are the authority. A run carries references only: the cluster
// and host an action reaches over SSH, the cluster whose Vault or API
// server it uses. Before an action runs, the guard fills each reference in
// from the worker's inventory of that cluster (address, port, user, sudo,
// key or Vault SSH signer, known_hosts; Vault address, token file, CA and
// mounts; kubeconfig and context). Whatever else an input says of a
// target is dropped, so a run names where to act but never how to get
// there. A cluster the worker does not serve, or a host or section its
// inventory lacks, is refused before the action runs, without retry, with
// an audit line. A kubeconfig a run asks the worker to save
// (kube.save-kubeconfig, where every later kube action loads it from) must
// carry only embedded certificates and keys and name only the cluster's
// own API servers (its inventory's kubernetes.server, or a controller's
// address on the API port). Whoever can start a workflow (the codec key's
// holders) then gets the clusters the worker serves, with the credentials
// the worker chose, and nothing else.
package trust
