#!/usr/bin/env bash
# Builds Kedge's Temporal server (cmd/kedge-temporal: Temporal's server at
# go.mod's version, authorizing calls by the roles of client certificates)
# as `temporal-server`, the name the official image's entrypoint runs, into
# a cache directory keyed by that version and a hash of the module's
# sources it links (internal/temporalauth, internal/mtls, ...) and go.sum,
# once per machine and change. Prints the directory: the team topology
# (integration/teamlab, `make team`) puts it first on the server's PATH.
# Plain `go build` in this module, so the packages the kedge binary already
# compiled are reused. Safe to run concurrently.
set -euo pipefail
cd "$(dirname "$0")/.."

server=$(go list -m -f '{{.Version}}' go.temporal.io/server)
# The module's own files the server links, by path, and go.sum.
srcs=$(go list -deps -f '{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}' ./cmd/kedge-temporal)
hash=$( (cat go.sum; for f in $srcs; do printf '%s\n' "${f#"$PWD"/}"; cat "$f"; done) | sha256sum | cut -c1-16)
cache="${KEDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kedge/tools}"
out="$cache/kedge-temporal-$server-$hash"

if [ -x "$out/temporal-server" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -x "$out/temporal-server" ]; then
  echo "$out"
  exit 0
fi
printf '%s kedge-temporal: building ./cmd/kedge-temporal (server %s, sources %s)\n' "$(date +%T)" "$server" "$hash" >&2
go build -o "$out/temporal-server.tmp.$$" ./cmd/kedge-temporal
mv "$out/temporal-server.tmp.$$" "$out/temporal-server"
echo "$out"
