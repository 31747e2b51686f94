// Package searchattr names Kedge's custom search attributes — KedgeCluster,
// KedgeRunbook, KedgeNode and KedgeStatus, all Keyword — that let the
// Temporal Web UI and `kedge list` filter runs by cluster, runbook, node and
// state, and registers them on a namespace.
//
// `kedge dev` (and the integration tests' server, through
// internal/devserver) registers them at start; `kedge setup` registers them
// on a shared Temporal. Their values are indexed in plain text by Temporal's
// visibility store: they hold names (cluster, runbook, node) and a state,
// never params or outputs.
//
// Workflows read the keys only; nothing here does I/O on their behalf.
package searchattr
