#!/usr/bin/env bash
# Builds the test world's S3-compatible object store, SeaweedFS's `weed`
# binary, from the Go module proxy (integration/tools/seaweedfs pins it) into
# a cache directory keyed by the pinned version, once per machine. Prints the
# directory.
# Cold: about nine minutes on 2 cores (a 160 MB binary); cached: instant.
# Safe to run concurrently.
set -euo pipefail
cd "$(dirname "$0")/.."

# The module has no release tags; the pseudo-version is SeaweedFS 4.53.
weed_version=v0.0.0-20261109003541-7506e5f91cd6
cache="${KEDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kedge/tools}"
out="$cache/seaweedfs-$weed_version"
if [ -x "$out/weed" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
# One build at a time per machine; the binary is renamed into place whole.
exec 9>"$out/.lock"
flock 9
if [ -x "$out/weed" ]; then
  echo "$out"
  exit 0
fi
step() { printf '%s s3-tools: %s\n' "$(date +%T)" "$*" >&2; }

step "building seaweedfs $weed_version (takes minutes on a cold cache)"
(cd integration/tools/seaweedfs && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/weed.tmp.$$" github.com/seaweedfs/seaweedfs/weed && mv "$out/weed.tmp.$$" "$out/weed")
step "done"
echo "$out"
