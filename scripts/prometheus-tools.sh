#!/usr/bin/env bash
# Builds the test world's Prometheus server from the Go module proxy
# (integration/tools/prometheus pins it) into a cache directory keyed by the
# pinned version, once per machine. Prints the directory.
# Built without its cloud service discoveries (remove_all_sd: static, file
# and HTTP targets remain) and without its web UI's assets: the test world
# only scrapes loopback targets and asks its HTTP API.
# Cold: 4.5 minutes on 2 cores (an empty build cache, a 52 MB binary);
# cached: instant. Safe to run concurrently.
set -euo pipefail
cd "$(dirname "$0")/.."

prometheus_version=v0.316.0
cache="${KEDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kedge/tools}"
out="$cache/prometheus-$prometheus_version"
if [ -x "$out/prometheus" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
# One build at a time per machine; the binary is renamed into place whole.
exec 9>"$out/.lock"
flock 9
if [ -x "$out/prometheus" ]; then
  echo "$out"
  exit 0
fi
step() { printf '%s prometheus-tools: %s\n' "$(date +%T)" "$*" >&2; }

step "building prometheus $prometheus_version (takes minutes on a cold cache)"
(cd integration/tools/prometheus && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd -ldflags "-s -w" -o "$out/prometheus.tmp.$$" github.com/prometheus/prometheus/cmd/prometheus && mv "$out/prometheus.tmp.$$" "$out/prometheus")
step "done"
echo "$out"
