// Package satoken reads which key signed a Kubernetes service-account
// token: the key ID the API server writes into a token's header, and the
// key ID of a public key. Nothing here verifies a token; it tells a CA
// rotation whether a token still depends on the key it is about to drop.
package satoken
