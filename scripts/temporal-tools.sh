#!/usr/bin/env bash
# Builds the programs of Temporal's official images that the team
# topology runs (integration/teamlab, `make team`): temporal-server, its
# temporal-sql-tool and the Web UI server, at the versions go.mod pins (its
# `tool` lines), into a cache directory keyed by those versions, once per
# machine. Prints the directory. Plain `go build` in this module, so the
# packages the embedded server already compiled are reused: about a
# minute when the tests' build cache is warm. Safe to run concurrently.
set -euo pipefail
cd "$(dirname "$0")/.."

server=$(go list -m -f '{{.Version}}' go.temporal.io/server)
ui=$(go list -m -f '{{.Version}}' github.com/temporalio/ui-server/v2)
cache="${KEDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kedge/tools}"
out="$cache/temporal-$server-ui-$ui"
declare -A pkgs=(
  [temporal-server]=go.temporal.io/server/cmd/server
  [temporal-sql-tool]=go.temporal.io/server/cmd/tools/sql
  [temporal-ui-server]=github.com/temporalio/ui-server/v2/cmd/server
)

complete() {
  for bin in "${!pkgs[@]}"; do [ -x "$out/$bin" ] || return 1; done
}
if complete; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if complete; then
  echo "$out"
  exit 0
fi
step() { printf '%s temporal-tools: %s\n' "$(date +%T)" "$*" >&2; }
for bin in "${!pkgs[@]}"; do
  [ -x "$out/$bin" ] && continue
  step "building $bin (${pkgs[$bin]})"
  go build -o "$out/$bin.tmp.$$" "${pkgs[$bin]}"
  mv "$out/$bin.tmp.$$" "$out/$bin"
done
step "done"
echo "$out"
