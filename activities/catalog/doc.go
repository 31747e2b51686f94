// Package catalog lists every action a runbook step can name, with its
// inputs, outputs, what it targets and the timeouts the workflow applies.
//
// The catalog is derived from the activities' own input and result structs
// (their json, kedge and doc tags), so the validator, `kedge actions` and the
// activities cannot drift apart. It is pure data: the workflow reads it, so
// it must never do I/O or depend on map order.
package catalog
