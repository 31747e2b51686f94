// Package source holds what the runbook and inventory loaders share: source
// positions, the FILE:LINE:COL error list every validation error is reported
// in, and strict helpers for walking YAML nodes.
//
// Every decoding helper here rejects unknown fields and reports the position
// of the offending node; nothing in this package touches the network or
// starts work.
package source
