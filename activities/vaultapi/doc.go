// Package vaultapi holds Kedge's Vault actions: vault.issue-cert issues a
// certificate and key from the cluster's PKI engine, vault.read-secret
// reads a KV v2 secret. The cluster's Vault comes from the inventory; its
// token is read by the worker from the inventory's token file (or
// $VAULT_TOKEN) when the action runs, so it never reaches Temporal. What
// the actions return (private keys included) travels only through the
// payload codec, sealed.
package vaultapi
