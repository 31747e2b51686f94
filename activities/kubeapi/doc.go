// Package kubeapi holds the actions that act on a cluster through the
// Kubernetes API (client-go): cordon, uncordon, drain, delete-node,
// wait-node and label-taint, as methods of Activities, and the
// cluster-wide ones (bootstrap tokens, RBAC, cluster-info,
// save-kubeconfig).
//
// Every action is idempotent (cordoning a cordoned node changes nothing),
// heartbeats while it waits, and bounds every wait with a timeout: nothing
// here may wait forever. Credentials come from the kubeconfig the inventory
// names; they are never logged.
//
// A kubeconfig is data, never code: LoadConfig reads every file itself
// and hands client-go embedded data only, refusing (CredentialRefused,
// with an audit line) an exec plugin, an auth-provider, a token file, a
// file outside the kubeconfig's own directory, and a kubeconfig or client
// key that is not the worker's own secret. kube.save-kubeconfig writes
// only embedded certificates and keys (Saveable); the worker's credential
// guard checks its servers against the inventory.
//
// The actions' names and their input and result types are declared in
// kedge.dev/kedge/actions/kube (pure data), imported under its own name.
package kubeapi
