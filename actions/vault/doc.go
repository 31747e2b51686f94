// Package vault declares the Vault actions' names and their input and
// result types: vault.issue-cert, vault.cluster-ca, vault.key-pair and
// vault.read-secret. It is pure data, so the action table, the runbook
// language and the workflow can name them without linking Vault's client;
// activities/vaultapi implements them. It must never do I/O.
package vault
