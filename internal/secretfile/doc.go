// Package secretfile reads files that hold a secret (an SSH private key,
// a Vault token, a webhook or Slack signing secret) and refuses one that
// other users may read or write, as OpenSSH refuses an unprotected
// private key: a secret another account can read is already spent.
package secretfile
