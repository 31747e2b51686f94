// Package certinfo declares tls.check, the action that asks a TLS
// endpoint which certificate it serves, and certinfo.scan-ca, which asks
// many which CA signed what they present: their names and their input and
// result types.
//
// It is pure data: it must never import the Temporal SDK or anything that
// does I/O, so the action table, the runbook language and the workflow
// can name the action without linking it. The action is implemented by
// kedge.dev/kedge/activities/tlsprobe.
package certinfo
