// Package pkihost holds the actions that move a cluster's key material
// between its hosts and Vault on the worker, so that no private key
// passes through Temporal: pki.adopt takes an existing cluster's CAs and
// service-account key into Vault, and pki.renew-in-place renews the
// certificates a controller's layout names, under their own file names,
// from the CA that issued them. pki.rotate-ca moves a host a stage of a
// CA rotation further; it writes its plan to the host before it installs
// anything (rotatejournal.go), so an attempt after a lost worker finishes
// that install and never plans it again. The plan holds keys: it stays
// on the host, mode 0600, and gives way to the step's result once
// installed; it never goes into a heartbeat or a result.
package pkihost
