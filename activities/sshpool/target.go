package sshpool

import tgt "kedge.dev/kedge/actions/target"

// Target says how to reach one host (see target.SSH).
type Target = tgt.SSH

// VaultCA names the Vault SSH role that signs login certificates (see
// target.VaultCA).
type VaultCA = tgt.VaultCA

// DefaultPort is the port of a target that names none.
const DefaultPort = tgt.DefaultPort
