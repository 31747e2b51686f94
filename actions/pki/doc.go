// Package pki declares the pki actions' names and their input and result
// types: pki.adopt, pki.renew-in-place and pki.check-ca-life. It is pure
// data, so the action table, the runbook language and the workflow can
// name them without linking the SSH pool or Vault's client; activities/pkihost
// implements them. It must never do I/O.
package pki
