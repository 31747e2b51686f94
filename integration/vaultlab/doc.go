// Package vaultlab starts a real HashiCorp Vault server on loopback for
// Kedge's tests and lab, built from the Go module proxy by
// scripts/vault-tools.sh, and configures it the way Kedge uses Vault:
//
//   - a PKI engine at pki/ with a generated root CA "kedge-lab-ca" and a
//     role "kubernetes" that issues certificates for any name, IP SANs and
//     localhost;
//   - an SSH secrets engine at ssh-client-signer/ with a generated CA key
//     and a role "kedge" that signs user certificates (default user root,
//     30 minutes, permit-pty);
//   - a KV version 2 engine at secret/.
//
// Vault runs in dev mode: in memory, unsealed, with a random root token.
// It is test infrastructure; it must never be used for real secrets.
package vaultlab
