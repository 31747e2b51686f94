// Package pubkey reads a public key written as PEM, the two ways Kedge
// meets one: a PKIX "PUBLIC KEY" block (what openssl and the API
// server's service-account key file hold) and a PKCS #1 "RSA PUBLIC
// KEY" block; and it says whether two keys are the same key.
//
// It is pure: it parses the text it is given and never reads a file,
// Vault or the network. kube.check-service-account-key
// (activities/kubeapi) and the Vault import of a key pair
// (activities/vaultapi) share it, so neither imports the other nor keeps
// its own copy.
package pubkey
