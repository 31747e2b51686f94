// Package target holds what an action's input says about where it acts:
// a host over SSH, a cluster's Vault, a cluster's API server. It is pure
// data, so the runbook language and the workflow can name targets without
// linking the clients that reach them.
package target
