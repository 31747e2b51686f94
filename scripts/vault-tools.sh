#!/usr/bin/env bash
# Builds the test world's HashiCorp Vault server from the Go module proxy
# (integration/tools/vault pins it) into a cache directory keyed by the pinned
# version, once per machine. Prints the directory.
# Cold: about ten minutes on 2 cores; cached: instant. Safe to run
# concurrently.
set -euo pipefail
cd "$(dirname "$0")/.."

vault_version=v1.21.0
cache="${KEDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kedge/tools}"
out="$cache/vault-$vault_version"
if [ -x "$out/vault" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
# One build at a time per machine; the binary is renamed into place whole.
exec 9>"$out/.lock"
flock 9
if [ -x "$out/vault" ]; then
  echo "$out"
  exit 0
fi
step() { printf '%s vault-tools: %s\n' "$(date +%T)" "$*" >&2; }

step "building vault $vault_version (takes minutes on a cold cache)"
(cd integration/tools/vault && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/vault.tmp.$$" github.com/hashicorp/vault && mv "$out/vault.tmp.$$" "$out/vault")
step "done"
echo "$out"
