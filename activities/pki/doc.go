// Package pki holds the actions that move a cluster's key material
// between its hosts and Vault on the worker, so that no private key
// passes through Temporal: pki.adopt takes an existing cluster's CAs and
// service-account key into Vault, and pki.renew-in-place renews the
// certificates a controller's layout names, under their own file names,
// from the CA that issued them.
package pki
