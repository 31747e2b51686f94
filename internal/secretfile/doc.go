// Package secretfile reads files that hold a secret (an SSH private key,
// a Vault token, a webhook or Slack signing secret, a TLS client key, a
// kubeconfig) and refuses one that other users may read or write, or
// that another account owns, as OpenSSH refuses an unprotected private
// key: a secret another account can read is already spent, and one
// another account owns is theirs to replace.
//
// It must never log or return a secret in an error.
package secretfile
