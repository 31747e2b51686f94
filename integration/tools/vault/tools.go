//go:build tools

// Package vault pins the Vault server the test world runs.
package vault

import _ "github.com/hashicorp/vault"
