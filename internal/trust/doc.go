// Package trust decides where a worker may connect and with what. The
// inventories of the clusters a worker serves, read from the worker's own
// files, are the authority: an action whose input names an SSH target
// (address, port, user, key, known_hosts, sudo), a Vault (address, token
// file, CA, mounts) or a kubeconfig that is not what the worker's
// inventory of that cluster says is refused before it runs, without
// retry, and the refusal is logged as an audit line. A kubeconfig a run
// asks the worker to save (kube.save-kubeconfig, where every later kube
// action loads it from) must carry only embedded certificates and keys
// and name only the cluster's own API servers (its inventory's
// kubernetes.server, or a controller's address on the API port).
// Whoever can start a workflow (the codec key's holders) then gets the
// clusters the worker serves, with the credentials the worker chose, and
// nothing else.
package trust
